#include "model/decode_step.h"

#include "model/moe_decode.h"

namespace zaya {

float* decode_step(ZayaModel& model, const DecodeRows& rows, DecodeCache& cache, Arena& arena,
                   std::vector<const int32_t*>* routes) {
  const Backend& be = model.backend();
  const ModelConfig& c = model.config();
  const int n = rows.n, E = int(c.hidden_size), V = int(c.vocab_size), L = int(c.num_stages);
  const int R = int(c.router_dim), Dq = int(c.num_q_heads * c.head_dim);
  const int half = int(c.rotary_dim()) / 2;
  const ZayaModel::HeadWeights head = model.decoding_head();

  // h_{-1}: the embedding rows; each row's RoPE rows at its own position.
  float* h_prev = arena.floats(size_t(n) * E);
  be.embedding_forward(h_prev, head.embedding, rows.tokens, n, E);
  CcaDecodeRows cca_rows;
  cca_rows.n = n;
  cca_rows.slots = rows.slots;
  cca_rows.kv_rows = rows.kv_rows;
  float* cos_rows = arena.floats(size_t(n) * half);
  float* sin_rows = arena.floats(size_t(n) * half);
  be.gather_rows(cos_rows, rows.rope_cos, rows.positions, n, half);
  be.gather_rows(sin_rows, rows.rope_sin, rows.positions, n, half);
  cca_rows.rope_cos = cos_rows;
  cca_rows.rope_sin = sin_rows;
  const float* r_prev = nullptr;
  const float* router_state = nullptr;
  float* q = arena.floats(size_t(n) * Dq);
  float* att = arena.floats(size_t(n) * Dq);
  for (int i = 0; i < L; ++i) {
    const ZayaModel::StageWeights& st = model.decoding_weights(i);
    float* res = arena.floats(size_t(n) * E);
    be.residual_merge_forward(res, h_prev, st.hb, st.hs, r_prev, st.rb, st.rs, n, E);
    float* x = arena.floats(size_t(n) * E);
    be.rmsnorm_forward(x, nullptr, res, st.norm_w, n, E, float(c.norm_eps));
    float* h = arena.floats(size_t(n) * E);
    if (ModelConfig::is_attention_stage(i)) {
      const int a = i / 2;
      cca_rows.kv = cache.kv_rows_base(a);
      cca_decode_project(be, q, cca_rows, cache.conv_state(a), x, st.cca, c, arena);
      cache.attend(a, att, q, n);
      cca_decode_output(be, h, att, n, st.cca, c);
    } else {
      float* state = arena.floats(size_t(n) * R);
      int32_t* chosen = arena.ints(size_t(n));
      moe_decode(be, h, state, x, router_state, st.moe, c, n, arena, chosen);
      if (routes) routes->push_back(chosen);
      router_state = state;
    }
    h_prev = h;
    r_prev = res;
  }
  // The final merge with model.res_scale, final_norm and the tied LM head.
  float* final_r = arena.floats(size_t(n) * E);
  be.residual_merge_forward(final_r, h_prev, head.hb, head.hs, r_prev, head.rb, head.rs, n, E);
  float* y = arena.floats(size_t(n) * E);
  be.rmsnorm_forward(y, nullptr, final_r, head.norm_w, n, E, float(c.norm_eps));
  float* logits = arena.floats(size_t(n) * V);
  be.rows_matmul_forward(logits, y, head.embedding, nullptr, n, E, V);
  return logits;
}

}  // namespace zaya
