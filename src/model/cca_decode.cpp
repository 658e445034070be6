#include "model/cca_decode.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/fast_exp.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/norm.h"
#include "backend/cpu/rope.h"
#include "core/error.h"

namespace zaya {

using Dims = CcaDims;

void cca_cache_init(CcaCache& cache, const ModelConfig& c, int64_t capacity) {
  ZAYA_CHECK(capacity > 0, "cca_cache_init: capacity must be > 0, got ", capacity);
  const Dims D(c);
  cache.capacity = capacity;
  cache.length = 0;
  cache.k.assign(size_t(capacity) * D.Dk, 0.0f);
  cache.v.assign(size_t(capacity) * D.Dk, 0.0f);
  cache.window.assign(size_t(2) * D.C, 0.0f);
  cache.v_prev_raw.assign(size_t(D.Dk / 2), 0.0f);
}

void cca_cache_from_forward(CcaCache& cache, const CcaActivations& act, const ModelConfig& c,
                            int batch, int seq, int b) {
  const Dims D(c);
  ZAYA_CHECK(b >= 0 && b < batch, "cca_cache_from_forward: sequence ", b, " of ", batch);
  ZAYA_CHECK(seq <= cache.capacity, "cca_cache_from_forward: ", seq,
             " positions do not fit a cache of ", cache.capacity);
  const size_t first = size_t(b) * seq;
  std::memcpy(cache.k.data(), act.k + first * D.Dk, sizeof(float) * size_t(seq) * D.Dk);
  std::memcpy(cache.v.data(), act.v + first * D.Dk, sizeof(float) * size_t(seq) * D.Dk);
  // The window: u rows of positions seq-2 and seq-1 (zeros where the sequence has none).
  std::fill(cache.window.begin(), cache.window.end(), 0.0f);
  for (int back = 1; back <= 2; ++back) {
    const int t = seq - back;
    if (t < 0) continue;
    std::memcpy(cache.window.data() + size_t(2 - back) * D.C, act.u + (first + t) * D.C,
                sizeof(float) * D.C);
  }
  std::memcpy(cache.v_prev_raw.data(), act.proj + (first + seq - 1) * D.P + D.C + D.Dk / 2,
              sizeof(float) * size_t(D.Dk / 2));
  cache.length = seq;
}

void cca_decode(float* out, CcaCache& cache, const float* x, const CcaWeights& w,
                const float* rope_cos, const float* rope_sin, const ModelConfig& c, Arena& arena) {
  const Dims D(c);
  const int64_t t = cache.length;
  ZAYA_CHECK(t < cache.capacity, "cca_decode: the cache is full (", cache.capacity, " positions)");

  // 1. The fused projection: q0 ‖ k0 ‖ v_cur ‖ v_prev_raw.
  float* proj = arena.floats(size_t(D.P));
  cpu::matmul_forward(proj, x, w.qkvv, nullptr, 1, D.E, D.P);
  const float* u = proj;  // q0 ‖ k0, this position's row of the conv input
  const float* u2 = cache.window.data();
  const float* u1 = u2 + D.C;

  // 2. Depthwise conv rows a[t] (from u[t-2], u[t-1]) and a[t+1] (from u[t-1], u[t]), then the
  //    grouped conv z[t] = W0·a[t] + W1·a[t+1] + bias per head group (backend/cpu/conv.h).
  float* a0 = arena.floats(size_t(D.C));
  float* a1 = arena.floats(size_t(D.C));
  for (int ch = 0; ch < D.C; ++ch) {
    const float w0 = w.conv0_w[2 * ch], w1 = w.conv0_w[2 * ch + 1];
    a0[ch] = w.conv0_b[ch] + w0 * u2[ch] + w1 * u1[ch];
    a1[ch] = w.conv0_b[ch] + w0 * u1[ch] + w1 * u[ch];
  }
  float* qk1 = arena.floats(size_t(D.C));
  for (int ch = 0; ch < D.C; ++ch) {
    const int g0 = ch / D.d * D.d;
    const float* wc = w.conv1_w + size_t(ch) * D.d * 2;
    float s0 = 0.0f, s1 = 0.0f;
    for (int j = 0; j < D.d; ++j) {
      s0 += wc[2 * j] * a0[g0 + j];
      s1 += wc[2 * j + 1] * a1[g0 + j];
    }
    qk1[ch] = s0 + s1 + w.conv1_b[ch];
  }

  // 3. q-k-mean skip from the pre-conv projections; 4. value shift.
  const float* q0 = proj;
  const float* k0 = proj + D.Dq;
  for (int h = 0; h < D.nq; ++h) {
    const float* kj = k0 + (h / D.g) * D.d;
    for (int i = 0; i < D.d; ++i) qk1[h * D.d + i] += 0.5f * (q0[h * D.d + i] + kj[i]);
  }
  for (int j = 0; j < D.nk; ++j)
    for (int i = 0; i < D.d; ++i) {
      float mean = 0.0f;
      for (int h = j * D.g; h < (j + 1) * D.g; ++h) mean += q0[h * D.d + i];
      mean /= float(D.g);
      qk1[D.Dq + j * D.d + i] += 0.5f * mean + 0.5f * k0[j * D.d + i];
    }
  const int half = D.Dk / 2;
  float* v = cache.v.data() + size_t(t) * D.Dk;
  std::memcpy(v, k0 + D.Dk, sizeof(float) * half);
  std::memcpy(v + half, cache.v_prev_raw.data(), sizeof(float) * half);  // zeros at t = 0

  // 5. L2 norm (× key temperatures), 6. partial RoPE at position t.
  float* head_temp = arena.floats(size_t(D.H));
  for (int h = 0; h < D.H; ++h) head_temp[h] = h < D.nq ? 1.0f : w.temp[h - D.nq];
  float* qkn = arena.floats(size_t(D.C));
  float* inv_norm = arena.floats(size_t(D.H));
  cpu::l2norm_forward(qkn, inv_norm, qk1, head_temp, 1, D.H, D.d);
  cpu::rope_apply(qkn, rope_cos, rope_sin, 1, 1, D.H, D.d, D.rot, false);
  std::memcpy(cache.k.data() + size_t(t) * D.Dk, qkn + D.Dq, sizeof(float) * D.Dk);

  // 7. Attention of this query over positions 0..t of its key head, scale 1/sqrt(d).
  const float scale = float(1.0 / std::sqrt(double(D.d)));
  float* att = arena.floats(size_t(D.Dq));
  float* p = arena.floats(size_t(t + 1));
  for (int h = 0; h < D.nq; ++h) {
    const int j = h / D.g;
    const float* q = qkn + h * D.d;
    float mx = -INFINITY;
    for (int64_t s = 0; s <= t; ++s) {
      const float* k = cache.k.data() + size_t(s) * D.Dk + j * D.d;
      float dot = 0.0f;
      for (int i = 0; i < D.d; ++i) dot += q[i] * k[i];
      p[s] = dot * scale;
      mx = std::max(mx, p[s]);
    }
    float sum = 0.0f;
    for (int64_t s = 0; s <= t; ++s) sum += p[s] = cpu::fast_exp(p[s] - mx);
    float* o = att + h * D.d;
    std::fill(o, o + D.d, 0.0f);
    for (int64_t s = 0; s <= t; ++s) {
      const float* vs = cache.v.data() + size_t(s) * D.Dk + j * D.d;
      for (int i = 0; i < D.d; ++i) o[i] += p[s] * vs[i];
    }
    const float inv = 1.0f / sum;
    for (int i = 0; i < D.d; ++i) o[i] *= inv;
  }

  // 8. Output projection; then the state moves one position on.
  cpu::matmul_forward(out, att, w.o_proj, nullptr, 1, D.Dq, D.E);
  std::memcpy(cache.window.data(), u1, sizeof(float) * D.C);
  std::memcpy(cache.window.data() + D.C, u, sizeof(float) * D.C);
  std::memcpy(cache.v_prev_raw.data(), proj + D.C + half, sizeof(float) * half);
  cache.length = t + 1;
}

}  // namespace zaya
