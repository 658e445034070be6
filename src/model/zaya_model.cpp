#include "model/zaya_model.h"

#include <algorithm>
#include <cstring>

#include "backend/rope_tables.h"
#include "core/error.h"
#include "core/trace.h"
#include "dist/rank_sum.h"

namespace zaya {

ZayaModel::ZayaModel(const ModelConfig& config) : config_(config), placement_(config) {
  config_.validate("ZayaModel");
  bind_weights();
}

void ZayaModel::set_backend(const Backend& backend) {
  if (backend.host_memory()) {
    arena_.set_memory(nullptr);
    transient_.set_memory(nullptr);
    arena_memory_.reset();
  } else {
    auto memory = std::make_unique<BackendArenaMemory>(backend);
    arena_.set_memory(memory.get());  // drops the blocks of the previous memory first
    transient_.set_memory(memory.get());
    arena_memory_ = std::move(memory);
  }
  placement_.set_backend(backend);
  acts_.clear();
  logits_valid_ = have_loss_ = chunked_loss_ = false;
}

template <class Views, class Product, class Plain>
ZayaModel::StageTensors<Views> ZayaModel::bind_stage(int i, Product product, Plain plain) const {
  const ParamRegistry& reg = params().registry();
  auto tensor = [&](const std::string& name) { return plain(reg.get(name).offset); };
  auto matrix = [&](const std::string& name) { return product(reg.get(name).offset); };
  auto optional = [&](const std::string& name) -> typename Views::Plain {
    const ParamSpec* s = reg.find(name);
    return s ? plain(s->offset) : nullptr;
  };
  StageTensors<Views> s{};
  const std::string p = "model.layers." + std::to_string(i) + ".";
  s.norm_w = tensor(p + "input_norm.weight");
  s.hs = tensor(p + "res_scale.hidden_states_scale");
  s.hb = tensor(p + "res_scale.hidden_states_bias");
  s.rs = optional(p + "res_scale.residual_scale");
  s.rb = optional(p + "res_scale.residual_bias");
  if (ModelConfig::is_attention_stage(i)) {
    const std::string a = p + "self_attn.";
    s.cca = CcaTensors<Views>{matrix(a + "qkv.linear_q.weight"), tensor(a + "qkv.conv_qk.0.weight"),
                              tensor(a + "qkv.conv_qk.0.bias"),  tensor(a + "qkv.conv_qk.1.weight"),
                              tensor(a + "qkv.conv_qk.1.bias"),  tensor(a + "qkv.temp"),
                              matrix(a + "o_proj.weight")};
  } else {
    const std::string r = p + "zaya_block.router.";
    MoeTensors<Views>& m = s.moe;
    m.down_w = matrix(r + "down_proj.weight");
    m.down_b = tensor(r + "down_proj.bias");
    m.states_scale = optional(r + "router_states_scale");
    m.rms_w = tensor(r + "rmsnorm_eda.weight");
    m.mlp0_w = matrix(r + "router_mlp.0.weight");
    m.mlp0_b = tensor(r + "router_mlp.0.bias");
    m.mlp2_w = matrix(r + "router_mlp.2.weight");
    m.mlp2_b = tensor(r + "router_mlp.2.bias");
    m.mlp4_w = matrix(r + "router_mlp.4.weight");
    m.balancing_biases = tensor(r + "balancing_biases");
    for (int e = 0; e < int(config_.num_experts); ++e) {
      const std::string x = p + "zaya_block.experts.local_experts." + std::to_string(e) + ".";
      m.fc1.push_back(matrix(x + "linear_fc1.weight"));
      m.fc2.push_back(matrix(x + "linear_fc2.weight"));
    }
  }
  return s;
}

void ZayaModel::bind_weights() {
  bound_layout_ = placement_.layout_version();
  const ParamRegistry& reg = params().registry();
  const int L = int(config_.num_stages);
  // After stage i's backward the tensors of stages < i and the embedding may still receive
  // gradient; everything above the highest of them is final, whatever the registry's order.
  final_from_.assign(size_t(L) + 1, 0);
  for (int i = 0; i <= L; ++i)
    for (const ParamSpec& spec : reg.specs())
      if (spec.name == "model.embed_tokens.weight" || (spec.stage >= 0 && spec.stage < i))
        final_from_[size_t(i)] =
            std::max(final_from_[size_t(i)], int64_t(spec.offset) + spec.numel);
  grad_spans_.assign(size_t(L) + 1, {});
  for (const ParamSpec& spec : reg.specs()) {
    auto& spans = grad_spans_[size_t(spec.stage >= 0 ? spec.stage : L)];
    if (!spans.empty() && spans.back().first + spans.back().second == spec.offset)
      spans.back().second += size_t(spec.numel);  // contiguous with the last one
    else
      spans.emplace_back(spec.offset, size_t(spec.numel));
  }
  // Where the ops read a weight and add its gradient (the layout of the buffers in use).
  auto weight_at = [this](size_t offset) { return placement_.weight(offset); };
  auto fp32_weight_at = [this](size_t offset) { return placement_.fp32_weight(offset); };
  auto grad_at = [this](size_t offset) { return placement_.grad(offset); };
  auto fp32_grad_at = [this](size_t offset) { return placement_.fp32_grad(offset); };
  auto fp32_product_at = [this](size_t offset) {
    return WeightRef(placement_.fp32_weight(offset));
  };
  // Decoding's fp32 views: none where the weights are kept in bf16 alone (the decoder refuses).
  const bool fp32_copy = placement_.bf16_products() && !placement_.bf16_weight_storage();
  stages_.assign(L, StageWeights{});
  grads_.assign(L, StageGrads{});
  for (int i = 0; i < L; ++i) {
    if (ModelConfig::is_attention_stage(i)) {
      // The fused projection relies on the registry placing q, k, v1, v2 back to back.
      const std::string a = "model.layers." + std::to_string(i) + ".self_attn.qkv.";
      ZAYA_CHECK(
          reg.get(a + "val_proj2.weight").offset ==
              reg.get(a + "linear_q.weight").offset +
                  size_t(config_.conv_channels() + config_.kv_dim() / 2) * config_.hidden_size,
          "parameter layout: CCA projections of stage ", i, " are not contiguous");
    }
    stages_[size_t(i)] = bind_stage<WeightViews>(i, weight_at, fp32_weight_at);
    grads_[size_t(i)] = bind_stage<GradViews>(i, grad_at, fp32_grad_at);
  }
  fp32_stages_.clear();
  if (fp32_copy)
    for (int i = 0; i < L; ++i)
      fp32_stages_.push_back(bind_stage<WeightViews>(i, fp32_product_at, fp32_weight_at));
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
  ensure_bound();
  sharded_ = context_group_ != nullptr;
  ZAYA_CHECK(!sharded_ || be().host_memory(), "context parallelism runs on the CPU backend only; ",
             "the model is on ", be().name());
  if (sharded_) shard_ = ContextShard(context_group_, S);
  // Inference forwards (no targets: the decoder's prefill reads every activation) keep fp32.
  storing_bf16_ = activation_storage_ == ActivationStorage::kBf16 && !targets.empty();
  ZAYA_CHECK(!(storing_bf16_ && sharded_),
             "bf16 activation storage does not run under context parallelism");
  check_inputs(tokens, targets, B, S);
  const RopeTables rope = take_inputs(tokens, targets, B, S);
  // The products' bf16 copy, once per forward (the backward reads the same one).
  placement_.round_product_weights();
  // Embedding (no sqrt(E) scaling): this is h_{-1}, the first "branch output".
  const int N = B_ * T_, E = int(config_.hidden_size);
  emb_ = arena_.floats(size_t(N) * E);
  be().embedding_forward(emb_, embedding_weights(), op_tokens_, N, E);
  stages_forward(rope);
  return head_forward();
}

void ZayaModel::check_inputs(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                             int B, int S) const {
  const int V = int(config_.vocab_size);
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
}

// This rank's rows of the tokens and targets (and RoPE's rows of their positions), in the
// backend's memory; the arena starts over.
RopeTables ZayaModel::take_inputs(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                                  int B, int S) {
  const int T = sharded_ ? shard_.local_len() : S;  // rows per sequence on this rank
  arena_.reset();
  transient_.reset();
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
  op_tokens_ = tokens_.data();
  op_targets_ = targets_.data();
  if (!be().host_memory()) {
    // The master weights, the tokens, the targets and the RoPE rows go to the backend's memory:
    // explicit copies, once per forward.
    if (!placement_.resident_wanted()) placement_.push_weights();
    int32_t* tok = arena_.ints(tokens_.size());
    be().to_device(tok, tokens_.data(), sizeof(int32_t) * tokens_.size());
    op_tokens_ = tok;
    if (!targets_.empty()) {
      int32_t* tgt = arena_.ints(targets_.size());
      be().to_device(tgt, targets_.data(), sizeof(int32_t) * targets_.size());
      op_targets_ = tgt;
    }
    const size_t table = size_t(S) * size_t(config_.rotary_dim() / 2);
    float* cos_t = arena_.floats(table);
    float* sin_t = arena_.floats(table);
    be().to_device(cos_t, rope.cos, sizeof(float) * table);
    be().to_device(sin_t, rope.sin, sizeof(float) * table);
    rope = RopeTables{cos_t, sin_t};
    dev_rope_ = rope;
  }
  return rope;
}

const ZayaModel::StageWeights& ZayaModel::decoding_weights(int i) {
  ZAYA_CHECK(i >= 0 && i < int(config_.num_stages), "decoding_weights: stage ", i, " of ",
             config_.num_stages);
  ZAYA_CHECK(!placement_.bf16_weight_storage(),
             "decoding reads fp32 weights, and this model keeps its weights in bf16 alone "
             "(--weight-storage bf16)");
  ensure_bound();
  return fp32_stages_.empty() ? stages_[size_t(i)] : fp32_stages_[size_t(i)];
}

ZayaModel::HeadWeights ZayaModel::decoding_head() {
  const ParamRegistry& reg = params().registry();
  auto w = [&](const char* name) { return placement_.fp32_weight(reg.get(name).offset); };
  return HeadWeights{w("model.res_scale.hidden_states_scale"),
                     w("model.res_scale.hidden_states_bias"),
                     w("model.res_scale.residual_scale"),
                     w("model.res_scale.residual_bias"),
                     w("model.final_norm.weight"),
                     w("model.embed_tokens.weight")};
}

void ZayaModel::prefill(std::span<const int32_t> prompt,
                        const std::function<void(int a, const CcaActivations& act)>& cache) {
  const RecomputePlan recompute = recompute_;
  recompute_ = RecomputePlan();  // the cache reads every attention stage's activations
  try {
    forward(prompt, {}, 1, int(prompt.size()));
  } catch (...) {
    recompute_ = recompute;
    throw;
  }
  recompute_ = recompute;
  for (int i = 0; i < int(config_.num_stages); i += 2) cache(i / 2, acts_[size_t(i)].cca);
}

WeightRef ZayaModel::embedding_weights() const {
  return placement_.weight(embedding_offset());
}

// Final merge with model.res_scale, final_norm, the tied LM head and the loss.
float ZayaModel::head_forward() {
  const trace::Span span("head forward", "model");
  const int N = B_ * T_, E = int(config_.hidden_size), V = int(config_.vocab_size);
  const WeightRef emb_w = embedding_weights();
  const float* h_prev = acts_.empty() ? emb_ : acts_.back().h;  // the last stage's output
  const float* r_prev = acts_.empty() ? nullptr : acts_.back().r;
  const ParamRegistry& reg = params().registry();
  final_r_ = arena_.floats(size_t(N) * E);
  final_rstd_ = arena_.floats(N);
  final_y_ = arena_.floats(size_t(N) * E);
  be().merge_rmsnorm_forward(
      final_r_, final_y_, final_rstd_, h_prev,
      placement_.fp32_weight(reg.get("model.res_scale.hidden_states_bias").offset),
      placement_.fp32_weight(reg.get("model.res_scale.hidden_states_scale").offset), r_prev,
      placement_.fp32_weight(reg.get("model.res_scale.residual_bias").offset),
      placement_.fp32_weight(reg.get("model.res_scale.residual_scale").offset),
      placement_.fp32_weight(reg.get("model.final_norm.weight").offset), N, E,
      float(config_.norm_eps));
  have_loss_ = !targets_.empty();
  chunked_loss_ = have_loss_ && lm_chunks_.enabled();
  if (chunked_loss_) {
    // The LM head and the loss in blocks: no [N, V] logits.
    logits_valid_ = false;
    lse_ = arena_.floats(N);
    lm_scratch_ = arena_.floats(lm_chunks_.scratch_floats(N, V));
    const double total = be().lm_head_loss_forward(lse_, final_y_, emb_w, op_targets_, N, E, V,
                                                   lm_chunks_, lm_scratch_, &loss_count_);
    return mean_loss(total);
  }
  logits_ = arena_.floats(size_t(N) * V);
  be().matmul_forward(logits_, final_y_, emb_w, nullptr, N, E, V);
  logits_valid_ = true;
  if (!have_loss_) return 0.0f;
  lse_ = arena_.floats(N);
  const double total = be().cross_entropy_forward(lse_, logits_, op_targets_, N, V, &loss_count_);
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

void ZayaModel::observe_router(int i) {
  if (!router_observer_) return;
  const int routes = int(config_.num_routes());
  const size_t n = size_t(B_) * size_t(T_) * size_t(routes);
  const float* logits = acts_[size_t(i)].moe.logits;
  if (!be().host_memory()) {
    host_router_logits_.resize(n);
    be().to_host(host_router_logits_.data(), logits, sizeof(float) * n);
    logits = host_router_logits_.data();
  }
  router_observer_(i / 2, std::span<const float>(logits, n), routes);
}

void ZayaModel::backward(float loss_scale) {
  ZAYA_CHECK(have_loss_ && (logits_valid_ || chunked_loss_),
             "backward() needs a forward() with targets before it");
  ensure_bound();
  const int N = B_ * T_, E = int(config_.hidden_size);
  float* G = placement_.grads_base();
  const bool on_host = be().host_memory();
  // On a backend of its own memory the backward adds into a copy of the host's gradients there,
  // which then replaces the host's: each gradient element sees the same additions in the same
  // order as on the host, so accumulating micro-batches gives the host path's bits (computing
  // this backward's share from zero and adding it to the host's would round differently).
  // (Resident parameters: the gradients stay in the backend's memory from step to step.)
  const bool copy_grads = !on_host && !placement_.resident_wanted();
  ZAYA_CHECK(
      !copy_grads || !placement_.bf16_gradients(),
      "ZayaModel::backward: bf16 gradients need resident parameters (placement().set_resident)");
  // The gradients the backward writes are the ones the caller reads (host, or resident): each
  // stage's are final as soon as it is done, and set_gradients_final reports them.
  const bool in_place = !copy_grads;
  if (copy_grads) {
    placement_.commit_grads(0, params().size());
    be().to_device(G, params().grads(), sizeof(float) * params().size());
  }
  commit_grads_of(int(config_.num_stages));  // the embedding (the tied LM head) and final tensors
  const StreamGrads top = head_backward(loss_scale);
  if (gradients_final_ && in_place) gradients_final_(final_from_[size_t(config_.num_stages)]);
  float* demb = stages_backward(top, in_place);
  // Embedding rows, accumulated in token order (deterministic).
  be().embedding_backward(placement_.fp32_grad(embedding_offset()), demb, op_tokens_, N, E,
                          int(config_.vocab_size));
  if (copy_grads)  // one explicit copy of the gradients back, over the host's
    be().to_host(params().grads(), G, sizeof(float) * params().size());
  if (gradients_final_) gradients_final_(0);
}

void ZayaModel::commit_grads_of(int stage_or_model) {
  for (const auto& [offset, n] : grad_spans_[size_t(stage_or_model)])
    placement_.commit_grads(offset, n);
}

size_t ZayaModel::embedding_offset() const {
  return params().registry().get("model.embed_tokens.weight").offset;
}

// Loss → logits (in place) → final_norm → final merge: the gradients w.r.t. the last stage's
// output and merged residual.
ZayaModel::StreamGrads ZayaModel::head_backward(float loss_scale) {
  const trace::Span span("head backward", "model");
  const int N = B_ * T_, E = int(config_.hidden_size), V = int(config_.vocab_size);
  const int L = int(config_.num_stages);
  const ParamRegistry& reg = params().registry();
  auto w = [&](const char* name) { return placement_.fp32_weight(reg.get(name).offset); };
  auto g = [&](const char* name) { return placement_.fp32_grad(reg.get(name).offset); };
  const WeightRef emb_w = embedding_weights();
  const GradRef emb_g = placement_.grad(embedding_offset());
  const float scale = loss_count_ ? loss_scale / float(loss_count_) : 0.0f;
  float* dy = arena_.zeros(size_t(N) * E);
  if (chunked_loss_) {
    be().lm_head_loss_backward(dy, emb_g, final_y_, emb_w, lse_, op_targets_, N, E, V, scale,
                               lm_chunks_, lm_scratch_);
    chunked_loss_ = false;
  } else {
    be().cross_entropy_backward_inplace(logits_, lse_, op_targets_, N, V, scale);
    logits_valid_ = false;
    be().matmul_backward(dy, emb_g, nullptr, logits_, final_y_, emb_w, N, E, V);
  }
  float* dr_final = arena_.zeros(size_t(N) * E);
  be().rmsnorm_backward(dr_final, g("model.final_norm.weight"), dy, final_r_,
                        w("model.final_norm.weight"), final_rstd_, N, E);
  float* dh = arena_.zeros(size_t(N) * E);  // gradient w.r.t. the last block output
  float* dr = arena_.zeros(size_t(N) * E);  // gradient w.r.t. the last merged residual
  be().residual_merge_backward(
      dh, g("model.res_scale.hidden_states_bias"), g("model.res_scale.hidden_states_scale"), dr,
      g("model.res_scale.residual_bias"), g("model.res_scale.residual_scale"), dr_final,
      acts_[L - 1].h, w("model.res_scale.hidden_states_bias"),
      w("model.res_scale.hidden_states_scale"), acts_[L - 1].r, w("model.res_scale.residual_bias"),
      w("model.res_scale.residual_scale"), N, E);
  return {dh, dr};
}

std::span<const float> ZayaModel::logits() const {
  ZAYA_CHECK(logits_valid_,
             "logits() is valid only between forward() and backward(), and not after a forward "
             "with the LM head in chunks (set_lm_head_chunks), which keeps none");
  const size_t n = size_t(B_) * T_ * size_t(config_.vocab_size);
  if (be().host_memory()) return {logits_, n};
  host_logits_.resize(n);
  be().to_host(host_logits_.data(), logits_, sizeof(float) * n);
  return host_logits_;
}

std::span<const int32_t> ZayaModel::routes(int stage) const {
  ZAYA_CHECK(stage >= 0 && stage < int(acts_.size()) && !ModelConfig::is_attention_stage(stage),
             "routes(", stage, "): not an MoE stage of the last forward()");
  const StageActivations& a = acts_[size_t(stage)];
  const int32_t* route = a.kept_route ? a.kept_route : a.moe.route;
  const size_t n = size_t(B_) * T_;
  if (be().host_memory()) return {route, n};
  host_routes_.resize(n);
  be().to_host(host_routes_.data(), route, sizeof(int32_t) * n);
  return host_routes_;
}

}  // namespace zaya

namespace zaya {
std::span<const float> ZayaModel::route_probs(int stage) const {
  routes(stage);  // validates
  ZAYA_CHECK(recompute_.moe == Recompute::kNone,
             "route_probs() is not kept with recompute on (set_recompute)");
  const size_t n = size_t(B_) * T_ * size_t(config_.num_routes());
  if (be().host_memory()) return {acts_[stage].moe.probs, n};
  host_probs_.resize(n);
  be().to_host(host_probs_.data(), acts_[stage].moe.probs, sizeof(float) * n);
  return host_probs_;
}
}  // namespace zaya
