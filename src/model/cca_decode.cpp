#include "model/cca_decode.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/norm.h"
#include "backend/cpu/rope.h"
#include "backend/cpu/rowwise.h"
#include "core/error.h"

namespace zaya {

using Dims = CcaDims;

void cca_conv_state_init(CcaConvState& s, const ModelConfig& c) {
  const Dims D(c);
  s.window.assign(size_t(2) * D.C, 0.0f);
  s.v_prev_raw.assign(size_t(D.Dk / 2), 0.0f);
}

void cca_conv_state_from_forward(CcaConvState& s, const CcaActivations& act, const ModelConfig& c,
                                 int batch, int seq, int b) {
  const Dims D(c);
  ZAYA_CHECK(b >= 0 && b < batch && seq >= 1, "cca_conv_state_from_forward: sequence ", b, " of ",
             batch, ", length ", seq);
  cca_conv_state_init(s, c);
  const size_t first = size_t(b) * seq;
  // The window: u rows of positions seq-2 and seq-1 (zeros where the sequence has none).
  for (int back = 1; back <= 2; ++back) {
    const int t = seq - back;
    if (t < 0) continue;
    std::memcpy(s.window.data() + size_t(2 - back) * D.C, act.u + (first + t) * D.C,
                sizeof(float) * D.C);
  }
  std::memcpy(s.v_prev_raw.data(), act.proj + (first + seq - 1) * D.P + D.C + D.Dk / 2,
              sizeof(float) * size_t(D.Dk / 2));
}

void cca_decode_project(float* q, const CcaDecodeRow* rows, const float* x, int n,
                        const CcaWeights& w, const ModelConfig& c, Arena& arena) {
  const Dims D(c);
  const int half = D.Dk / 2;
  // 1. The fused projection of every row: q0 ‖ k0 ‖ v_cur ‖ v_prev_raw.
  float* proj = arena.floats(size_t(n) * D.P);
  cpu::rows_matmul_forward(proj, x, w.qkvv, nullptr, n, D.E, D.P);
  float* head_temp = arena.floats(size_t(D.H));
  for (int h = 0; h < D.H; ++h) head_temp[h] = h < D.nq ? 1.0f : w.temp[h - D.nq];
  float* qk1 = arena.floats(size_t(n) * D.C);
  float* qkn = arena.floats(size_t(n) * D.C);
  float* inv_norm = arena.floats(size_t(n) * D.H);
  const int half_rot = D.rot / 2;
  float* cos_rows = arena.floats(size_t(n) * half_rot);
  float* sin_rows = arena.floats(size_t(n) * half_rot);
  float* a0s = arena.floats(size_t(n) * D.C);  // depthwise conv rows a[t] and a[t+1] of each row
  float* a1s = arena.floats(size_t(n) * D.C);

  // 2-3. Per row (each row's own work, so rows do not interact): the convolutions, then the
  //      q-k-mean skip.
#pragma omp parallel for schedule(static)
  for (int r = 0; r < n; ++r) {
    const CcaDecodeRow& row = rows[r];
    const float* u = proj + size_t(r) * D.P;  // q0 ‖ k0: this position's row of the conv input
    const float* u2 = row.state->window.data();
    const float* u1 = u2 + D.C;
    float* z = qk1 + size_t(r) * D.C;
    // Depthwise conv rows a[t] (from u[t-2], u[t-1]) and a[t+1] (from u[t-1], u[t]), then the
    // grouped conv z[t] = W0·a[t] + W1·a[t+1] + bias per head group (backend/cpu/conv.h).
    float* a0 = a0s + size_t(r) * D.C;
    float* a1 = a1s + size_t(r) * D.C;
    for (int ch = 0; ch < D.C; ++ch) {
      const float w0 = w.conv0_w[2 * ch], w1 = w.conv0_w[2 * ch + 1];
      a0[ch] = w.conv0_b[ch] + w0 * u2[ch] + w1 * u1[ch];
      a1[ch] = w.conv0_b[ch] + w0 * u1[ch] + w1 * u[ch];
    }
    for (int ch = 0; ch < D.C; ++ch) {
      const int g0 = ch / D.d * D.d;
      const float* wc = w.conv1_w + size_t(ch) * D.d * 2;
      float s0 = 0.0f, s1 = 0.0f;
      for (int j = 0; j < D.d; ++j) {
        s0 += wc[2 * j] * a0[g0 + j];
        s1 += wc[2 * j + 1] * a1[g0 + j];
      }
      z[ch] = s0 + s1 + w.conv1_b[ch];
    }
    const float* q0 = u;
    const float* k0 = u + D.Dq;
    for (int h = 0; h < D.nq; ++h) {
      const float* kj = k0 + (h / D.g) * D.d;
      for (int i = 0; i < D.d; ++i) z[h * D.d + i] += 0.5f * (q0[h * D.d + i] + kj[i]);
    }
    for (int j = 0; j < D.nk; ++j)
      for (int i = 0; i < D.d; ++i) {
        float mean = 0.0f;
        for (int h = j * D.g; h < (j + 1) * D.g; ++h) mean += q0[h * D.d + i];
        mean /= float(D.g);
        z[D.Dq + j * D.d + i] += 0.5f * mean + 0.5f * k0[j * D.d + i];
      }
    std::memcpy(cos_rows + size_t(r) * half_rot, row.rope_cos, sizeof(float) * half_rot);
    std::memcpy(sin_rows + size_t(r) * half_rot, row.rope_sin, sizeof(float) * half_rot);
  }

  // 4. L2 norm (× key temperatures) of every head of every row, 5. partial RoPE, each row at its
  //    own position (the rows as one "sequence" whose RoPE table rows are the rows' positions).
  cpu::l2norm_forward(qkn, inv_norm, qk1, head_temp, n, D.H, D.d);
  cpu::rope_apply(qkn, cos_rows, sin_rows, 1, n, D.H, D.d, D.rot, false);

  for (int r = 0; r < n; ++r) {
    const CcaDecodeRow& row = rows[r];
    const float* u = proj + size_t(r) * D.P;
    const float* qr = qkn + size_t(r) * D.C;
    std::memcpy(q + size_t(r) * D.Dq, qr, sizeof(float) * D.Dq);
    // 6. The cache entry: the key, and the value shift v = v_cur ‖ val_proj2 of t-1.
    if (row.k_slot) {
      std::memcpy(row.k_slot, qr + D.Dq, sizeof(float) * D.Dk);
      std::memcpy(row.v_slot, u + D.C, sizeof(float) * half);
      std::memcpy(row.v_slot + half, row.state->v_prev_raw.data(), sizeof(float) * half);
    }
    // The state moves one position on.
    float* window = row.state->window.data();
    std::memmove(window, window + D.C, sizeof(float) * D.C);
    std::memcpy(window + D.C, u, sizeof(float) * D.C);
    std::memcpy(row.state->v_prev_raw.data(), u + D.C + half, sizeof(float) * half);
  }
}

void cca_decode_output(float* out, const float* att, int n, const CcaWeights& w,
                       const ModelConfig& c) {
  const Dims D(c);
  cpu::rows_matmul_forward(out, att, w.o_proj, nullptr, n, D.Dq, D.E);
}

}  // namespace zaya
