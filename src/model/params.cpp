#include "model/params.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/rng.h"

namespace zaya {

const char* optim_group_name(OptimGroup g) {
  switch (g) {
    case OptimGroup::Muon:
      return "muon";
    case OptimGroup::AdamW:
      return "adamw";
    case OptimGroup::Buffer:
      return "buffer";
  }
  return "?";
}

size_t assign_flat_offsets(std::vector<ParamSpec>& specs) {
  size_t total = 0;
  for (ParamSpec& s : specs) {
    s.numel = shape_numel(s.shape);
    s.offset = aligned_param_offset(total);
    total = s.offset + size_t(s.numel);
  }
  return total;
}

void ParamRegistry::add(std::string name, Shape shape, OptimGroup group, InitKind init, float scale,
                        int stage, int expert, Start start) {
  ParamSpec s;
  s.numel = shape_numel(shape);
  s.name = std::move(name);
  s.shape = std::move(shape);
  s.group = group;
  s.init = init;
  s.init_scale = scale;
  s.stage = stage;
  s.expert = expert;
  s.offset = start == Start::Aligned ? aligned_param_offset(total_) : total_;
  total_ = s.offset + size_t(s.numel);
  index_[s.name] = specs_.size();
  specs_.push_back(std::move(s));
}

ParamRegistry::ParamRegistry(const ModelConfig& c) {
  const int64_t E = c.hidden_size, d = c.head_dim, C = c.conv_channels(), R = c.router_dim;
  const int64_t Dq = c.q_dim(), Dk = c.kv_dim(), F = c.expert_hidden;
  const float std = float(c.init_std);
  using G = OptimGroup;
  using I = InitKind;
  add("model.embed_tokens.weight", {c.vocab_size, E}, G::AdamW, I::Normal, std, -1);
  for (int i = 0; i < int(c.num_stages); ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    add(p + "input_norm.weight", {E}, G::AdamW, I::Ones, 0, i);
    add(p + "res_scale.hidden_states_scale", {E}, G::AdamW, I::Ones, 0, i);
    add(p + "res_scale.hidden_states_bias", {E}, G::AdamW, I::Zeros, 0, i);
    if (i >= 1) {
      add(p + "res_scale.residual_scale", {E}, G::AdamW, I::Ones, 0, i);
      add(p + "res_scale.residual_bias", {E}, G::AdamW, I::Zeros, 0, i);
    }
    if (ModelConfig::is_attention_stage(i)) {
      const std::string a = p + "self_attn.";
      // Order matters: q, k, v1, v2 are contiguous so they form one [Dq + 2 Dk, E] matrix.
      add(a + "qkv.linear_q.weight", {Dq, E}, G::Muon, I::Normal, std, i);
      const auto next = Start::RightAfterPrevious;
      add(a + "qkv.linear_k.weight", {Dk, E}, G::Muon, I::Normal, std, i, -1, next);
      add(a + "qkv.val_proj1.weight", {Dk / 2, E}, G::Muon, I::Normal, std, i, -1, next);
      add(a + "qkv.val_proj2.weight", {Dk / 2, E}, G::Muon, I::Normal, std, i, -1, next);
      // Convolutions: PyTorch's Conv1d default init, uniform(±1/sqrt(fan_in)).
      const float b0 = float(1.0 / std::sqrt(2.0)), b1 = float(1.0 / std::sqrt(2.0 * d));
      add(a + "qkv.conv_qk.0.weight", {C, 1, 2}, G::AdamW, I::Uniform, b0, i);
      add(a + "qkv.conv_qk.0.bias", {C}, G::AdamW, I::Uniform, b0, i);
      add(a + "qkv.conv_qk.1.weight", {C, d, 2}, G::AdamW, I::Uniform, b1, i);
      add(a + "qkv.conv_qk.1.bias", {C}, G::AdamW, I::Uniform, b1, i);
      // Key temperature starts at 1 (Zyphra's released code inits 0 and relies on the
      // checkpoint; 0 would make every key zero and attention uniform at step 0).
      add(a + "qkv.temp", {c.num_kv_heads}, G::AdamW, I::Ones, 0, i);
      add(a + "o_proj.weight", {E, Dq}, G::Muon, I::Normal, std, i);
    } else {
      const std::string r = p + "zaya_block.router.";
      add(r + "down_proj.weight", {R, E}, G::Muon, I::Normal, std, i);
      add(r + "down_proj.bias", {R}, G::AdamW, I::Zeros, 0, i);
      if (i >= 3) add(r + "router_states_scale", {R}, G::AdamW, I::Ones, 0, i);
      add(r + "rmsnorm_eda.weight", {R}, G::AdamW, I::Ones, 0, i);
      add(r + "router_mlp.0.weight", {R, R}, G::Muon, I::Normal, std, i);
      add(r + "router_mlp.0.bias", {R}, G::AdamW, I::Zeros, 0, i);
      add(r + "router_mlp.2.weight", {R, R}, G::Muon, I::Normal, std, i);
      add(r + "router_mlp.2.bias", {R}, G::AdamW, I::Zeros, 0, i);
      add(r + "router_mlp.4.weight", {c.num_routes(), R}, G::Muon, I::Normal, std, i);
      add(r + "balancing_biases", {c.num_routes()}, G::Buffer, I::SkipBias, 0, i);
      for (int e = 0; e < int(c.num_experts); ++e) {
        const std::string x = p + "zaya_block.experts.local_experts." + std::to_string(e) + ".";
        add(x + "linear_fc1.weight", {2 * F, E}, G::Muon, I::Normal, std, i, e);
        add(x + "linear_fc2.weight", {E, F}, G::Muon, I::Normal, std, i, e);
      }
    }
  }
  add("model.res_scale.hidden_states_scale", {E}, G::AdamW, I::Ones, 0, -1);
  add("model.res_scale.hidden_states_bias", {E}, G::AdamW, I::Zeros, 0, -1);
  add("model.res_scale.residual_scale", {E}, G::AdamW, I::Ones, 0, -1);
  add("model.res_scale.residual_bias", {E}, G::AdamW, I::Zeros, 0, -1);
  add("model.final_norm.weight", {E}, G::AdamW, I::Ones, 0, -1);
}

const ParamSpec* ParamRegistry::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &specs_[it->second];
}

const ParamSpec& ParamRegistry::get(const std::string& name) const {
  const ParamSpec* s = find(name);
  ZAYA_CHECK(s, "no parameter named '", name, "' in this model");
  return *s;
}

ParamStore::ParamStore(const ModelConfig& config)
    : registry_(config),
      weights_(std::make_shared<Storage>(registry_.total_floats() * sizeof(float))),
      grads_(std::make_shared<Storage>(registry_.total_floats() * sizeof(float))) {}

Tensor ParamStore::weight(const std::string& name) const {
  const ParamSpec& s = registry_.get(name);
  return Tensor(weights_, s.offset * sizeof(float), s.shape, DType::F32);
}

Tensor ParamStore::grad(const std::string& name) const {
  const ParamSpec& s = registry_.get(name);
  return Tensor(grads_, s.offset * sizeof(float), s.shape, DType::F32);
}

void ParamStore::zero_grads() {
  std::memset(grads_->data(), 0, size() * sizeof(float));
}

// Each element is a function of the seed, the tensor's name and its index alone (Philox is a
// counter-based generator), so the threads may split a tensor any way: the values do not depend
// on the thread count. Threads matter here: ZAYA1-base's depth-8 benchmark config has 1.4 billion
// values, 72 s on one core of the H100 machine before this loop ran on all of them.
void ParamStore::init(uint64_t seed) {
  float* w = weights();
  for (const ParamSpec& s : registry_.specs()) {
    const Philox rng(seed, hash_name(s.name.c_str()));
    float* p = w + s.offset;
    const float scale = s.init_scale;
    switch (s.init) {
      case InitKind::Normal:
#pragma omp parallel for schedule(static) if (s.numel > 65536)
        for (int64_t k = 0; k < s.numel; ++k) p[k] = scale * rng.normal(uint64_t(k));
        break;
      case InitKind::Uniform:
#pragma omp parallel for schedule(static) if (s.numel > 65536)
        for (int64_t k = 0; k < s.numel; ++k)
          p[k] = scale * (2.0f * rng.uniform(uint64_t(k)) - 1.0f);
        break;
      case InitKind::Ones:
        std::fill(p, p + s.numel, 1.0f);
        break;
      case InitKind::Zeros:
        std::fill(p, p + s.numel, 0.0f);
        break;
      case InitKind::SkipBias:  // experts 0, skip route −1 (Zyphra's init)
        std::fill(p, p + s.numel, 0.0f);
        p[s.numel - 1] = -1.0f;
        break;
    }
  }
}

}  // namespace zaya
