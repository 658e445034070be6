#include "infer/decoder.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/matmul.h"
#include "backend/cpu/norm.h"
#include "backend/cpu/residual.h"
#include "backend/cpu/rope.h"
#include "core/error.h"
#include "model/moe.h"

namespace zaya {

Decoder::Decoder(ZayaModel& model, int64_t capacity)
    : model_(model), capacity_(capacity > 0 ? capacity : model.config().max_seq_len) {
  const ModelConfig& c = model_.config();
  ZAYA_CHECK(capacity_ <= c.max_seq_len, "Decoder: capacity ", capacity_,
             " exceeds the model's max_seq_len ", c.max_seq_len);
  caches_.resize(size_t(c.num_attention_stages()));
  for (CcaCache& cache : caches_) cca_cache_init(cache, c, capacity_);
  const int half = int(c.rotary_dim()) / 2;
  rope_cos_.assign(size_t(capacity_) * half, 0.0f);
  rope_sin_.assign(size_t(capacity_) * half, 0.0f);
  cpu::rope_tables(rope_cos_.data(), rope_sin_.data(), int(capacity_), int(c.rotary_dim()),
                   float(c.rope_theta));
  logits_.assign(size_t(c.vocab_size), 0.0f);
}

int64_t Decoder::cache_bytes_per_token(const ModelConfig& c) {
  return c.num_attention_stages() * CcaCache::bytes_per_token(c);
}

int64_t Decoder::mha_cache_bytes_per_token(const ModelConfig& c) {
  return c.num_attention_stages() * 2 * c.hidden_size * 4;
}

int64_t Decoder::cache_bytes_allocated() const {
  int64_t b = 0;
  for (const CcaCache& cache : caches_)
    b += int64_t(cache.k.size() + cache.v.size() + cache.window.size() + cache.v_prev_raw.size()) *
         4;
  return b;
}

std::span<const float> Decoder::prefill(std::span<const int32_t> prompt) {
  const ModelConfig& c = model_.config();
  const int S = int(prompt.size());
  ZAYA_CHECK(S >= 1 && S <= capacity_, "prefill: the prompt has ", S,
             " tokens; the decoder holds 1 to ", capacity_);
  model_.forward(prompt, {}, 1, S);
  for (int i = 0; i < int(c.num_stages); i += 2)
    cca_cache_from_forward(caches_[size_t(i / 2)], model_.acts_[size_t(i)].cca, c, 1, S, 0);
  length_ = S;
  const std::span<const float> all = model_.logits();
  std::copy_n(all.data() + size_t(S - 1) * c.vocab_size, c.vocab_size, logits_.begin());
  return logits_;
}

std::span<const float> Decoder::step(int32_t token) {
  const ModelConfig& c = model_.config();
  const int E = int(c.hidden_size), V = int(c.vocab_size), L = int(c.num_stages);
  ZAYA_CHECK(token >= 0 && token < V, "decode: token id ", token, " is outside the vocabulary [0, ",
             V, ")");
  const int64_t t = length();
  ZAYA_CHECK(t >= 1, "decode: prefill() a prompt first");
  ZAYA_CHECK(t < capacity_, "decode: the sequence is full (", capacity_, " positions)");
  arena_.reset();
  const ParamRegistry& reg = model_.params().registry();
  const float* W = model_.params().weights();
  const float* emb_w = W + reg.get("model.embed_tokens.weight").offset;
  const int half = int(c.rotary_dim()) / 2;

  const float* h_prev = emb_w + size_t(token) * E;  // the embedding row is h_{-1}
  const float* r_prev = nullptr;
  const float* router_state = nullptr;
  for (int i = 0; i < L; ++i) {
    const ZayaModel::Stage& st = model_.stages_[size_t(i)];
    float* r = arena_.floats(size_t(E));
    cpu::residual_merge_forward(r, h_prev, st.hb, st.hs, r_prev, st.rb, st.rs, 1, E);
    float* rstd = arena_.floats(1);
    float* x = arena_.floats(size_t(E));
    cpu::rmsnorm_forward(x, rstd, r, st.norm_w, 1, E, float(c.norm_eps));
    float* h = arena_.floats(size_t(E));
    if (ModelConfig::is_attention_stage(i)) {
      cca_decode(h, caches_[size_t(i / 2)], x, st.cca, rope_cos_.data() + size_t(t) * half,
                 rope_sin_.data() + size_t(t) * half, c, arena_);
    } else {
      MoeActivations act;
      moe_forward(h, act, x, router_state, st.moe, c, 1, arena_);
      router_state = act.state;
    }
    h_prev = h;
    r_prev = r;
  }
  float* final_r = arena_.floats(size_t(E));
  cpu::residual_merge_forward(final_r, h_prev,
                              W + reg.get("model.res_scale.hidden_states_bias").offset,
                              W + reg.get("model.res_scale.hidden_states_scale").offset, r_prev,
                              W + reg.get("model.res_scale.residual_bias").offset,
                              W + reg.get("model.res_scale.residual_scale").offset, 1, E);
  float* rstd = arena_.floats(1);
  float* y = arena_.floats(size_t(E));
  cpu::rmsnorm_forward(y, rstd, final_r, W + reg.get("model.final_norm.weight").offset, 1, E,
                       float(c.norm_eps));
  cpu::matmul_forward(logits_.data(), y, emb_w, nullptr, 1, E, V);
  length_ = t + 1;
  return logits_;
}

}  // namespace zaya
