#include "model/zaya_model.h"

#include <algorithm>
#include <cstring>

#include "backend/rope_tables.h"
#include "core/error.h"
#include "dist/rank_sum.h"

namespace zaya {

namespace {

// The arena's blocks in a backend's memory.
class BackendArenaMemory final : public ArenaMemory {
 public:
  explicit BackendArenaMemory(const Backend& be) : be_(be) {}
  void* allocate(size_t bytes) override { return be_.allocate(bytes); }
  void release(void* p) noexcept override { be_.release(p); }
  void zero(void* p, size_t bytes) override { be_.fill_zero(p, bytes); }

 private:
  const Backend& be_;
};

}  // namespace

ZayaModel::ZayaModel(const ModelConfig& config) : config_(config), params_(config) {
  config_.validate("ZayaModel");
  bind_weights();
}

void ZayaModel::set_backend(const Backend& backend) {
  be_ = &backend;
  if (backend.host_memory()) {
    arena_.set_memory(nullptr);
    arena_memory_.reset();
    release_device_parameters();
    bind_weights();
  } else {
    auto memory = std::make_unique<BackendArenaMemory>(backend);
    arena_.set_memory(memory.get());  // drops the blocks of the previous memory first
    arena_memory_ = std::move(memory);
    const size_t bytes = sizeof(float) * params_.size();
    // The old buffers go first, so that the new ones never sit beside them.
    release_device_parameters();
    if (bf16_storage_wanted_ && backend.bf16_weights()) {
      if (!bf16_grads_wanted_) dev_grads_ = BackendBuffer(backend, bytes);
      lay_out_bf16_storage();  // binds the views (the weights come with the next push)
    } else {
      dev_grads_ = BackendBuffer(backend, bytes);
      dev_weights_ = BackendBuffer(backend, bytes);
      bind_weights();
    }
    if (resident_) set_resident(true);  // the new memory gets the weights
  }
  acts_.clear();
  logits_valid_ = have_loss_ = chunked_loss_ = false;
}

void ZayaModel::release_device_parameters() {
  for (BackendBuffer* b : {&dev_weights_, &dev_grads_, &dev_w16_, &dev_w32_, &dev_master_,
                           &dev_staging_, &dev_g16_, &dev_g32_})
    b->reset();
  weight_addresses_.reset();
  grad_addresses_.reset();
  stored_runs_.clear();
}

void ZayaModel::set_resident(bool resident) {
  resident_ = resident;
  if (!this->resident()) return;
  push_weights();
  zero_grads();
}

void ZayaModel::zero_grads() {
  if (bf16_gradients()) {
    be_->fill_zero(dev_g16_.get(), dev_g16_.bytes());
    be_->fill_zero(dev_g32_.get(), dev_g32_.bytes());
  } else if (resident()) {
    be_->fill_zero(dev_grads_.floats(), dev_grads_.bytes());
  } else {
    params_.zero_grads();
  }
}

float* ZayaModel::backend_grads() {
  ZAYA_CHECK(!bf16_gradients(),
             "ZayaModel::backend_grads: with bf16 gradients the gradients are not one fp32 buffer "
             "(load_grads())");
  return grads_base();
}

void ZayaModel::push_weights() {
  push_weights(0, params_.size());
}

void ZayaModel::push_weights(size_t offset, size_t n) {
  ZAYA_CHECK(offset + n <= params_.size(), "ZayaModel::push_weights: [", offset, ", ", offset + n,
             ") is outside the ", params_.size(), " parameters");
  if (bf16_weight_storage())
    push_stored(offset, n);
  else if (!be_->host_memory())
    be_->to_device(dev_weights_.floats() + offset, params_.weights() + offset, sizeof(float) * n);
}

void ZayaModel::pull_weights() {
  if (bf16_weight_storage())
    pull_stored();
  else if (!be_->host_memory())
    be_->to_host(params_.weights(), dev_weights_.floats(), sizeof(float) * params_.size());
}

float* ZayaModel::backend_weights() {
  ZAYA_CHECK(!bf16_weight_storage(),
             "ZayaModel::backend_weights: with bf16 weight storage the weights are not one fp32 "
             "buffer (master_weights(), store_weights())");
  return const_cast<float*>(weights_base());
}

const float* ZayaModel::weights_base() const {
  return be_->host_memory() ? params_.weights() : dev_weights_.floats();
}

float* ZayaModel::grads_base() {
  return be_->host_memory() ? params_.grads() : dev_grads_.floats();
}

void ZayaModel::bind_weights() {
  const ParamRegistry& reg = params_.registry();
  auto off = [&](const std::string& name) { return reg.get(name).offset; };
  // Where the ops read a weight and add its gradient (the layout of the buffers in use).
  auto wat = [&](size_t offset) { return weight_address(offset); };
  auto gat = [&](size_t offset) { return grad_address(offset); };
  auto opt = [&](const std::string& name, auto address) -> decltype(address(size_t(0))) {
    const ParamSpec* s = reg.find(name);
    return s ? address(s->offset) : nullptr;
  };
  const int L = int(config_.num_stages);
  // After stage i's backward the tensors of stages < i and the embedding may still receive
  // gradient; everything above the highest of them is final, whatever the registry's order.
  final_from_.assign(size_t(L) + 1, 0);
  for (int i = 0; i <= L; ++i)
    for (const ParamSpec& spec : reg.specs())
      if (spec.name == "model.embed_tokens.weight" || (spec.stage >= 0 && spec.stage < i))
        final_from_[size_t(i)] =
            std::max(final_from_[size_t(i)], int64_t(spec.offset) + spec.numel);
  stages_.assign(L, Stage{});
  grads_.assign(L, StageGrads{});
  for (int i = 0; i < L; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    Stage& s = stages_[i];
    StageGrads& g = grads_[i];
    s.norm_w = wat(off(p + "input_norm.weight"));
    g.norm_w = gat(off(p + "input_norm.weight"));
    s.hs = wat(off(p + "res_scale.hidden_states_scale"));
    g.hs = gat(off(p + "res_scale.hidden_states_scale"));
    s.hb = wat(off(p + "res_scale.hidden_states_bias"));
    g.hb = gat(off(p + "res_scale.hidden_states_bias"));
    s.rs = opt(p + "res_scale.residual_scale", wat);
    g.rs = opt(p + "res_scale.residual_scale", gat);
    s.rb = opt(p + "res_scale.residual_bias", wat);
    g.rb = opt(p + "res_scale.residual_bias", gat);
    if (ModelConfig::is_attention_stage(i)) {
      const std::string a = p + "self_attn.";
      // The fused projection relies on the registry placing q, k, v1, v2 back to back.
      const size_t q = off(a + "qkv.linear_q.weight");
      ZAYA_CHECK(
          off(a + "qkv.val_proj2.weight") ==
              q + size_t(config_.conv_channels() + config_.kv_dim() / 2) * config_.hidden_size,
          "parameter layout: CCA projections of stage ", i, " are not contiguous");
      s.cca = CcaWeights{wat(q),
                         wat(off(a + "qkv.conv_qk.0.weight")),
                         wat(off(a + "qkv.conv_qk.0.bias")),
                         wat(off(a + "qkv.conv_qk.1.weight")),
                         wat(off(a + "qkv.conv_qk.1.bias")),
                         wat(off(a + "qkv.temp")),
                         wat(off(a + "o_proj.weight"))};
      g.cca = CcaGrads{gat(q),
                       gat(off(a + "qkv.conv_qk.0.weight")),
                       gat(off(a + "qkv.conv_qk.0.bias")),
                       gat(off(a + "qkv.conv_qk.1.weight")),
                       gat(off(a + "qkv.conv_qk.1.bias")),
                       gat(off(a + "qkv.temp")),
                       gat(off(a + "o_proj.weight"))};
    } else {
      const std::string r = p + "zaya_block.router.";
      MoeWeights& mw = s.moe;
      MoeGrads& mg = g.moe;
      mw.down_w = wat(off(r + "down_proj.weight"));
      mg.down_w = gat(off(r + "down_proj.weight"));
      mw.down_b = wat(off(r + "down_proj.bias"));
      mg.down_b = gat(off(r + "down_proj.bias"));
      mw.states_scale = opt(r + "router_states_scale", wat);
      mg.states_scale = opt(r + "router_states_scale", gat);
      mw.rms_w = wat(off(r + "rmsnorm_eda.weight"));
      mg.rms_w = gat(off(r + "rmsnorm_eda.weight"));
      mw.mlp0_w = wat(off(r + "router_mlp.0.weight"));
      mg.mlp0_w = gat(off(r + "router_mlp.0.weight"));
      mw.mlp0_b = wat(off(r + "router_mlp.0.bias"));
      mg.mlp0_b = gat(off(r + "router_mlp.0.bias"));
      mw.mlp2_w = wat(off(r + "router_mlp.2.weight"));
      mg.mlp2_w = gat(off(r + "router_mlp.2.weight"));
      mw.mlp2_b = wat(off(r + "router_mlp.2.bias"));
      mg.mlp2_b = gat(off(r + "router_mlp.2.bias"));
      mw.mlp4_w = wat(off(r + "router_mlp.4.weight"));
      mg.mlp4_w = gat(off(r + "router_mlp.4.weight"));
      mw.balancing_biases = wat(off(r + "balancing_biases"));
      for (int e = 0; e < int(config_.num_experts); ++e) {
        const std::string x = p + "zaya_block.experts.local_experts." + std::to_string(e) + ".";
        mw.fc1.push_back(wat(off(x + "linear_fc1.weight")));
        mg.fc1.push_back(gat(off(x + "linear_fc1.weight")));
        mw.fc2.push_back(wat(off(x + "linear_fc2.weight")));
        mg.fc2.push_back(gat(off(x + "linear_fc2.weight")));
      }
    }
  }
}

void ZayaModel::set_rope_theta(double theta) {
  ZAYA_CHECK(theta > 0, "rope_theta must be > 0, got ", theta);
  if (theta == config_.rope_theta) return;
  config_.rope_theta = theta;
  rope_seq_ = -1;  // rebuild the tables on the next forward
}

void ZayaModel::rope_for(int S) {
  if (rope_seq_ == S) return;
  const int half = int(config_.rotary_dim()) / 2;
  rope_cos_.assign(size_t(S) * half, 0.0f);
  rope_sin_.assign(size_t(S) * half, 0.0f);
  rope_tables(rope_cos_.data(), rope_sin_.data(), S, int(config_.rotary_dim()),
              float(config_.rope_theta));
  rope_seq_ = S;
}

std::vector<int32_t> ZayaModel::shifted_targets(std::span<const int32_t> tokens, int B, int S) {
  std::vector<int32_t> t(size_t(B) * S, kIgnoreIndex);
  for (int b = 0; b < B; ++b)
    for (int s = 0; s + 1 < S; ++s) t[size_t(b) * S + s] = tokens[size_t(b) * S + s + 1];
  return t;
}

float ZayaModel::forward(std::span<const int32_t> tokens, std::span<const int32_t> targets, int B,
                         int S) {
  ZAYA_CHECK(B > 0 && S > 0, "forward: batch and sequence length must be positive, got B=", B,
             " S=", S);
  sharded_ = context_group_ != nullptr;
  ZAYA_CHECK(!sharded_ || be_->host_memory(), "context parallelism runs on the CPU backend only; ",
             "the model is on ", be_->name());
  if (sharded_) shard_ = ContextShard(context_group_, S);
  const int T = sharded_ ? shard_.local_len() : S;  // rows per sequence on this rank
  const int N = B * T, E = int(config_.hidden_size), V = int(config_.vocab_size);
  const int L = int(config_.num_stages);
  const size_t whole = size_t(B) * size_t(S);
  ZAYA_CHECK(tokens.size() == whole, "forward: expected ", whole, " tokens (B=", B, " × S=", S,
             "), got ", tokens.size());
  ZAYA_CHECK(targets.empty() || targets.size() == whole, "forward: expected ", whole,
             " targets, got ", targets.size());
  ZAYA_CHECK(S <= config_.max_seq_len, "forward: sequence length ", S,
             " exceeds the config's max_seq_len ", config_.max_seq_len);
  for (size_t t = 0; t < whole; ++t)
    ZAYA_CHECK(tokens[t] >= 0 && tokens[t] < V, "forward: token id ", tokens[t], " at position ", t,
               " is outside the vocabulary [0, ", V, ")");
  for (int t = 0; t < int(targets.size()); ++t) {
    ZAYA_CHECK(targets[t] == kIgnoreIndex || (targets[t] >= 0 && targets[t] < V),
               "forward: target id ", targets[t], " at position ", t,
               " is outside the vocabulary [0, ", V, ") and is not the ignore index -100");
  }
  arena_.reset();
  B_ = B;
  S_ = S;
  T_ = T;
  if (sharded_) {  // this rank's two chunks of each sequence
    tokens_ = shard_.take(tokens, B);
    targets_ = targets.empty() ? std::vector<int32_t>() : shard_.take(targets, B);
  } else {
    tokens_.assign(tokens.begin(), tokens.end());
    targets_.assign(targets.begin(), targets.end());
  }
  rope_for(S);
  RopeTables rope{rope_cos_.data(), rope_sin_.data()};
  if (sharded_) {
    // The tables' rows of this rank's positions, so that RoPE sees the global positions.
    const size_t half = size_t(config_.rotary_dim()) / 2;
    local_cos_.resize(size_t(T) * half);
    local_sin_.resize(size_t(T) * half);
    for (int t = 0; t < T; ++t) {
      const size_t p = size_t(shard_.position(t));
      std::copy_n(rope_cos_.data() + p * half, half, local_cos_.data() + size_t(t) * half);
      std::copy_n(rope_sin_.data() + p * half, half, local_sin_.data() + size_t(t) * half);
    }
    rope = RopeTables{local_cos_.data(), local_sin_.data()};
  }
  const ContextShard* shard = sharded_ ? &shard_ : nullptr;
  op_tokens_ = tokens_.data();
  op_targets_ = targets_.data();
  if (!be_->host_memory()) {
    // The master weights, the tokens, the targets and the RoPE rows go to the backend's memory:
    // explicit copies, once per forward.
    if (!resident_) push_weights();
    int32_t* tok = arena_.ints(tokens_.size());
    be_->to_device(tok, tokens_.data(), sizeof(int32_t) * tokens_.size());
    op_tokens_ = tok;
    if (!targets_.empty()) {
      int32_t* tgt = arena_.ints(targets_.size());
      be_->to_device(tgt, targets_.data(), sizeof(int32_t) * targets_.size());
      op_targets_ = tgt;
    }
    const size_t table = size_t(S) * size_t(config_.rotary_dim() / 2);
    float* cos_t = arena_.floats(table);
    float* sin_t = arena_.floats(table);
    be_->to_device(cos_t, rope.cos, sizeof(float) * table);
    be_->to_device(sin_t, rope.sin, sizeof(float) * table);
    rope = RopeTables{cos_t, sin_t};
    dev_rope_ = rope;
  }
  const float* emb_w = weight_address(params_.registry().get("model.embed_tokens.weight").offset);
  // The weights stay as they are until the next forward (the backward reads the same ones).
  if (bf16_weight_storage())
    be_->set_stored_bf16_weights(static_cast<const float*>(weight_addresses_.get()), params_.size(),
                                 static_cast<const uint16_t*>(dev_w16_.get()));
  else
    be_->set_product_weights(weights_base(), params_.size());

  // Embedding (no sqrt(E) scaling): this is h_{-1}, the first "branch output".
  emb_ = arena_.floats(size_t(N) * E);
  be_->embedding_forward(emb_, emb_w, op_tokens_, N, E);

  acts_.assign(L, StageActivations{});
  const float* h_prev = emb_;
  const float* r_prev = nullptr;
  for (int i = 0; i < L; ++i) {
    StageActivations& a = acts_[i];
    a.r = arena_.floats(size_t(N) * E);  // merged in stage_forward, with the norm
    a.h = arena_.floats(size_t(N) * E);
    const MergeInputs merge{h_prev, r_prev};
    if (recompute_) {
      // Keep the stage's input and output (and a MoE stage's routes and router state, which the
      // trainer and the next MoE stage read); the rest is recomputed in backward().
      if (!ModelConfig::is_attention_stage(i)) {
        a.kept_route = arena_.ints(N);
        a.kept_state = arena_.floats(size_t(N) * size_t(config_.router_dim));
      }
      const Arena::Mark mark = arena_.mark();
      stage_forward(i, a.h, rope, shard, &merge);
      if (!ModelConfig::is_attention_stage(i)) {
        be_->copy(a.kept_route, a.moe.route, sizeof(int32_t) * size_t(N));
        be_->copy(a.kept_state, a.moe.state, sizeof(float) * size_t(N) * config_.router_dim);
      }
      arena_.rewind(mark);
    } else {
      stage_forward(i, a.h, rope, shard, &merge);
    }
    h_prev = a.h;
    r_prev = a.r;
  }

  // Final merge with model.res_scale, final_norm, tied LM head.
  const ParamRegistry& reg = params_.registry();
  final_r_ = arena_.floats(size_t(N) * E);
  final_rstd_ = arena_.floats(N);
  final_y_ = arena_.floats(size_t(N) * E);
  be_->merge_rmsnorm_forward(
      final_r_, final_y_, final_rstd_, h_prev,
      weight_address(reg.get("model.res_scale.hidden_states_bias").offset),
      weight_address(reg.get("model.res_scale.hidden_states_scale").offset), r_prev,
      weight_address(reg.get("model.res_scale.residual_bias").offset),
      weight_address(reg.get("model.res_scale.residual_scale").offset),
      weight_address(reg.get("model.final_norm.weight").offset), N, E, float(config_.norm_eps));
  have_loss_ = !targets_.empty();
  chunked_loss_ = have_loss_ && lm_chunks_.enabled();
  if (chunked_loss_) {
    // The LM head and the loss in blocks: no [N, V] logits.
    logits_valid_ = false;
    lse_ = arena_.floats(N);
    lm_scratch_ = arena_.floats(lm_chunks_.scratch_floats(N, V));
    const double total = be_->lm_head_loss_forward(lse_, final_y_, emb_w, op_targets_, N, E, V,
                                                   lm_chunks_, lm_scratch_, &loss_count_);
    return mean_loss(total);
  }
  logits_ = arena_.floats(size_t(N) * V);
  be_->matmul_forward(logits_, final_y_, emb_w, nullptr, N, E, V);
  logits_valid_ = true;
  if (!have_loss_) return 0.0f;
  lse_ = arena_.floats(N);
  const double total = be_->cross_entropy_forward(lse_, logits_, op_targets_, N, V, &loss_count_);
  return mean_loss(total);
}

float ZayaModel::mean_loss(double total) {
  if (sharded_) {
    // One sequence's targets are spread over the group: the mean is over all of them.
    double sums[2] = {total, double(loss_count_)};
    dist::sum_over_ranks(context_group_, sums);
    total = sums[0];
    loss_count_ = int64_t(sums[1]);
  }
  return loss_count_ ? float(total / double(loss_count_)) : 0.0f;
}

const float* ZayaModel::router_state_out(int i) const {
  const StageActivations& a = acts_[size_t(i)];
  return a.kept_state ? a.kept_state : a.moe.state;
}

void ZayaModel::stage_forward(int i, float* h, const RopeTables& rope, const ContextShard* shard,
                              const MergeInputs* merge_from) {
  const int N = B_ * T_, E = int(config_.hidden_size);
  const Stage& st = stages_[size_t(i)];
  StageActivations& a = acts_[size_t(i)];
  a.rstd = arena_.floats(N);
  a.x = arena_.floats(size_t(N) * E);
  const float eps = float(config_.norm_eps);
  if (merge_from)  // r_i = (h_{i-1} + hb) ⊙ hs + (r_{i-1} + rb) ⊙ rs, then x_i = RMSNorm(r_i)
    be_->merge_rmsnorm_forward(a.r, a.x, a.rstd, merge_from->h_prev, st.hb, st.hs,
                               merge_from->r_prev, st.rb, st.rs, st.norm_w, N, E, eps);
  else
    be_->rmsnorm_forward(a.x, a.rstd, a.r, st.norm_w, N, E, eps);
  if (ModelConfig::is_attention_stage(i)) {
    cca_forward(h, a.cca, a.x, st.cca, rope, config_, B_, T_, arena_, shard, *be_);
    return;
  }
  const int32_t* held = nullptr;
  if (!held_routes_.empty()) {
    const size_t k = size_t(i / 2);  // MoE stages are the odd ones
    ZAYA_CHECK(k < held_routes_.size() && held_routes_[k].size() == size_t(N), "hold_routes: no [",
               N, "] routes for MoE stage ", i);
    for (int32_t r : held_routes_[k])
      ZAYA_CHECK(r >= 0 && r <= int32_t(config_.num_experts), "hold_routes: route ", r,
                 " outside [0, ", config_.num_experts, "]");
    held = held_routes_[k].data();
  }
  // The router state comes from the previous MoE stage (two stages back), none before the first.
  const float* state_in = i >= 3 ? router_state_out(i - 2) : nullptr;
  moe_forward(h, a.moe, a.x, state_in, st.moe, config_, N, arena_, held, *be_);
}

void ZayaModel::backward(float loss_scale) {
  ZAYA_CHECK(have_loss_ && (logits_valid_ || chunked_loss_),
             "backward() needs a forward() with targets before it");
  const int N = B_ * T_, E = int(config_.hidden_size), V = int(config_.vocab_size);
  const int L = int(config_.num_stages), R = int(config_.router_dim);
  const RopeTables rope = !be_->host_memory() ? dev_rope_
                          : sharded_          ? RopeTables{local_cos_.data(), local_sin_.data()}
                                              : RopeTables{rope_cos_.data(), rope_sin_.data()};
  const ContextShard* shard = sharded_ ? &shard_ : nullptr;
  const ParamRegistry& reg = params_.registry();
  float* G = grads_base();
  const bool on_host = be_->host_memory();
  // On a backend of its own memory the backward adds into a copy of the host's gradients there,
  // which then replaces the host's: each gradient element sees the same additions in the same
  // order as on the host, so accumulating micro-batches gives the host path's bits (computing
  // this backward's share from zero and adding it to the host's would round differently).
  // (Resident parameters: the gradients stay in the backend's memory from step to step.)
  const bool copy_grads = !on_host && !resident_;
  ZAYA_CHECK(!copy_grads || !bf16_gradients(),
             "ZayaModel::backward: bf16 gradients need resident parameters (set_resident)");
  // The gradients the backward writes are the ones the caller reads (host, or resident): each
  // stage's are final as soon as it is done, and set_gradients_final reports them.
  const bool in_place = !copy_grads;
  if (copy_grads) be_->to_device(G, params_.grads(), sizeof(float) * params_.size());
  // bf16 gradients: the products' backward adds into the bf16 values behind grad_address.
  if (bf16_gradients())
    be_->set_stored_bf16_gradients(static_cast<const float*>(grad_addresses_.get()), params_.size(),
                                   static_cast<uint16_t*>(dev_g16_.get()));
  auto w = [&](const char* name) { return weight_address(reg.get(name).offset); };
  auto g = [&](const char* name) { return grad_address(reg.get(name).offset); };
  const float* emb_w = w("model.embed_tokens.weight");
  float* emb_g = g("model.embed_tokens.weight");

  // Loss → logits (in place) → final_norm → final merge.
  const float scale = loss_count_ ? loss_scale / float(loss_count_) : 0.0f;
  float* dy = arena_.zeros(size_t(N) * E);
  if (chunked_loss_) {
    be_->lm_head_loss_backward(dy, emb_g, final_y_, emb_w, lse_, op_targets_, N, E, V, scale,
                               lm_chunks_, lm_scratch_);
    chunked_loss_ = false;
  } else {
    be_->cross_entropy_backward_inplace(logits_, lse_, op_targets_, N, V, scale);
    logits_valid_ = false;
    be_->matmul_backward(dy, emb_g, nullptr, logits_, final_y_, emb_w, N, E, V);
  }
  float* dr_final = arena_.zeros(size_t(N) * E);
  be_->rmsnorm_backward(dr_final, g("model.final_norm.weight"), dy, final_r_,
                        w("model.final_norm.weight"), final_rstd_, N, E);
  float* dh = arena_.zeros(size_t(N) * E);  // gradient w.r.t. the last block output
  float* dr = arena_.zeros(size_t(N) * E);  // gradient w.r.t. the last merged residual
  be_->residual_merge_backward(
      dh, g("model.res_scale.hidden_states_bias"), g("model.res_scale.hidden_states_scale"), dr,
      g("model.res_scale.residual_bias"), g("model.res_scale.residual_scale"), dr_final,
      acts_[L - 1].h, w("model.res_scale.hidden_states_bias"),
      w("model.res_scale.hidden_states_scale"), acts_[L - 1].r, w("model.res_scale.residual_bias"),
      w("model.res_scale.residual_scale"), N, E);
  if (gradients_final_ && in_place) gradients_final_(final_from_[size_t(L)]);

  // The gradients that flow from stage to stage live in two pairs of buffers taken here; what a
  // stage's backward takes besides is freed when the stage is done (and, with recompute, so is
  // its recomputed forward), so the backward holds one stage's temporaries at a time.
  float* dh_next = arena_.floats(size_t(N) * E);
  float* dr_next = arena_.floats(size_t(N) * E);
  const bool chained_moe = config_.num_moe_stages() >= 2;  // router-state gradients to pass on
  float* dstate_buf[2] = {chained_moe ? arena_.floats(size_t(N) * R) : nullptr,
                          chained_moe ? arena_.floats(size_t(N) * R) : nullptr};
  float* dstate = nullptr;  // gradient w.r.t. the router state flowing back across MoE stages
  for (int i = L - 1; i >= 0; --i) {
    const Stage& st = stages_[i];
    StageGrads& sg = grads_[i];
    StageActivations& a = acts_[i];
    const Arena::Mark mark = arena_.mark();
    if (recompute_) stage_forward(i, arena_.floats(size_t(N) * E), rope, shard);
    float* dx = arena_.zeros(size_t(N) * E);
    if (ModelConfig::is_attention_stage(i)) {
      cca_backward(dx, sg.cca, dh, a.cca, st.cca, rope, config_, B_, T_, arena_, shard, *be_);
    } else {
      float* dstate_in = nullptr;
      if (a.moe.state_in) {
        dstate_in = dstate_buf[0] == dstate ? dstate_buf[1] : dstate_buf[0];
        be_->fill_zero(dstate_in, sizeof(float) * size_t(N) * R);
      }
      moe_backward(dx, dstate_in, sg.moe, dh, dstate, a.moe, st.moe, config_, N, arena_, *be_);
      dstate = dstate_in;
    }
    // x_i = RMSNorm(r_i): add its gradient to the one r_i already has from the next merge.
    be_->rmsnorm_backward(dr, sg.norm_w, dx, a.r, st.norm_w, a.rstd, N, E);
    // r_i = (h_{i-1} + hb) ⊙ hs + (r_{i-1} + rb) ⊙ rs.
    const float* h_prev = i > 0 ? acts_[i - 1].h : emb_;
    const float* r_prev = i > 0 ? acts_[i - 1].r : nullptr;
    float* dh_prev = dh_next;
    float* dr_prev = r_prev ? dr_next : nullptr;
    be_->fill_zero(dh_prev, sizeof(float) * size_t(N) * E);
    if (dr_prev) be_->fill_zero(dr_prev, sizeof(float) * size_t(N) * E);
    be_->residual_merge_backward(dh_prev, sg.hb, sg.hs, dr_prev, sg.rb, sg.rs, dr, h_prev, st.hb,
                                 st.hs, r_prev, st.rb, st.rs, N, E);
    arena_.rewind(mark);
    dh_next = dh;
    dr_next = dr;
    dh = dh_prev;
    dr = dr_prev;
    if (gradients_final_ && in_place) gradients_final_(final_from_[size_t(i)]);
  }
  // Embedding rows, accumulated in token order (deterministic).
  be_->embedding_backward(emb_g, dh, op_tokens_, N, E);
  if (copy_grads)  // one explicit copy of the gradients back, over the host's
    be_->to_host(params_.grads(), G, sizeof(float) * params_.size());
  if (bf16_gradients()) be_->set_stored_bf16_gradients(nullptr, 0, nullptr);
  if (gradients_final_) gradients_final_(0);
}

std::span<const float> ZayaModel::logits() const {
  ZAYA_CHECK(logits_valid_,
             "logits() is valid only between forward() and backward(), and not after a forward "
             "with the LM head in chunks (set_lm_head_chunks), which keeps none");
  const size_t n = size_t(B_) * T_ * size_t(config_.vocab_size);
  if (be_->host_memory()) return {logits_, n};
  host_logits_.resize(n);
  be_->to_host(host_logits_.data(), logits_, sizeof(float) * n);
  return host_logits_;
}

std::span<const int32_t> ZayaModel::routes(int stage) const {
  ZAYA_CHECK(stage >= 0 && stage < int(acts_.size()) && !ModelConfig::is_attention_stage(stage),
             "routes(", stage, "): not an MoE stage of the last forward()");
  const StageActivations& a = acts_[size_t(stage)];
  const int32_t* route = a.kept_route ? a.kept_route : a.moe.route;
  const size_t n = size_t(B_) * T_;
  if (be_->host_memory()) return {route, n};
  host_routes_.resize(n);
  be_->to_host(host_routes_.data(), route, sizeof(int32_t) * n);
  return host_routes_;
}

}  // namespace zaya

namespace zaya {
std::span<const float> ZayaModel::route_probs(int stage) const {
  routes(stage);  // validates
  ZAYA_CHECK(!recompute_, "route_probs() is not kept with recompute on (set_recompute)");
  const size_t n = size_t(B_) * T_ * size_t(config_.num_routes());
  if (be_->host_memory()) return {acts_[stage].moe.probs, n};
  host_probs_.resize(n);
  be_->to_host(host_probs_.data(), acts_[stage].moe.probs, sizeof(float) * n);
  return host_probs_;
}
}  // namespace zaya
