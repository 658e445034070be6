#include "model/cca_decode.h"

#include "core/error.h"

namespace zaya {

using Dims = CcaDims;

int64_t cca_window_floats(const ModelConfig& c) {
  return 2 * int64_t(Dims(c).C);
}

int64_t cca_v_prev_floats(const ModelConfig& c) {
  return int64_t(Dims(c).Dk / 2);
}

void cca_state_from_forward(const Backend& be, const CcaDecodeState& st, int slot,
                            const CcaActivations& act, const ModelConfig& c, int seq) {
  const Dims D(c);
  ZAYA_CHECK(seq >= 1, "cca_state_from_forward: length ", seq);
  float* window = st.window + size_t(slot) * cca_window_floats(c);
  float* v_prev = st.v_prev + size_t(slot) * cca_v_prev_floats(c);
  // The window: u rows of positions seq-2 and seq-1 (zeros where the sequence has none).
  be.fill_zero(window, sizeof(float) * size_t(cca_window_floats(c)));
  for (int back = 1; back <= 2; ++back) {
    const int t = seq - back;
    if (t < 0) continue;
    be.copy(window + size_t(2 - back) * D.C, act.u + size_t(t) * D.C, sizeof(float) * D.C);
  }
  be.copy(v_prev, act.proj + size_t(seq - 1) * D.P + D.C + D.Dk / 2,
          sizeof(float) * size_t(D.Dk / 2));
}

void cca_decode_project(const Backend& be, float* q, const CcaDecodeRows& rows,
                        const CcaDecodeState& st, const float* x, const CcaWeights& w,
                        const ModelConfig& c, Arena& arena) {
  const Dims D(c);
  const int n = rows.n;
  // 1. The fused projection of every row: q0 ‖ k0 ‖ v_cur ‖ v_prev_raw.
  float* proj = arena.floats(size_t(n) * D.P);
  be.rows_matmul_forward(proj, x, w.qkvv.f32(kDecodeWeights), nullptr, n, D.E, D.P);
  // 1 for the query heads, the key temperatures for the key heads.
  float* head_temp = arena.floats(size_t(D.H));
  be.fill(head_temp, size_t(D.nq), 1.0f);
  be.copy(head_temp + D.nq, w.temp, sizeof(float) * size_t(D.H - D.nq));
  float* qk1 = arena.floats(size_t(n) * D.C);
  float* qkn = arena.floats(size_t(n) * D.C);
  float* inv_norm = arena.floats(size_t(n) * D.H);

  // 2-3. Per row (each row's own work, so rows do not interact): the convolutions over the
  //      state's window and this row, then the q-k-mean skip.
  CcaDecodeStep step;
  step.n = n;
  step.nq = D.nq;
  step.nk = D.nk;
  step.d = D.d;
  step.conv0_w = w.conv0_w;
  step.conv0_b = w.conv0_b;
  step.conv1_w = w.conv1_w;
  step.conv1_b = w.conv1_b;
  be.cca_decode_conv(qk1, proj, st.window, rows.slots, step);

  // 4. L2 norm (× key temperatures) of every head of every row, 5. partial RoPE, each row at its
  //    own position (the rows as one "sequence" whose RoPE table rows are the rows' positions).
  be.l2norm_forward(qkn, inv_norm, qk1, head_temp, n, D.H, D.d);
  be.rope_apply(qkn, rows.rope_cos, rows.rope_sin, 1, n, D.H, D.d, D.rot, false);

  // The queries; 6. the cache entries (the key, and the value shift v = v_cur ‖ val_proj2 of
  // t-1); the states move one position on.
  be.copy_rows(q, size_t(D.Dq), qkn, size_t(D.C), n, D.Dq);
  be.cca_decode_advance(st.window, st.v_prev, rows.kv, rows.kv_rows, qkn, proj, rows.slots, step);
}

void cca_decode_output(const Backend& be, float* out, const float* att, int n, const CcaWeights& w,
                       const ModelConfig& c) {
  const Dims D(c);
  be.rows_matmul_forward(out, att, w.o_proj.f32(kDecodeWeights), nullptr, n, D.Dq, D.E);
}

}  // namespace zaya
