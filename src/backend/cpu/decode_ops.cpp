#include "backend/cpu/decode_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/fast_exp.h"
#include "backend/cpu/parallel_threshold.h"

ZAYA_CPU_TARGET_BEGIN
namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

void cca_decode_conv(float* z_out, const float* proj, const float* window, const int32_t* slots,
                     const CcaDecodeStep& s) {
  const int g = s.nq / s.nk, Dq = s.nq * s.d, Dk = s.nk * s.d, C = Dq + Dk, P = C + Dk;
  const int d = s.d;
  // Small steps on one thread (see rows_matmul_forward): about 6 multiply-adds per channel.
#pragma omp parallel for schedule(static) if (worth_threads(int64_t(s.n) * C, int64_t(1) << 15))
  for (int r = 0; r < s.n; ++r) {
    const float* u = proj + size_t(r) * P;  // q0 ‖ k0: this position's row of the conv input
    const float* u2 = window + size_t(slots[r]) * 2 * C;
    const float* u1 = u2 + C;
    float* z = z_out + size_t(r) * C;
    // Depthwise conv rows a[t] (from u[t-2], u[t-1]) and a[t+1] (from u[t-1], u[t]), then the
    // grouped conv z[t] = W0·a[t] + W1·a[t+1] + bias per head group.
    std::vector<float> a(size_t(2) * C);
    float* a0 = a.data();
    float* a1 = a0 + C;
    for (int ch = 0; ch < C; ++ch) {
      const float w0 = s.conv0_w[2 * ch], w1 = s.conv0_w[2 * ch + 1];
      a0[ch] = s.conv0_b[ch] + w0 * u2[ch] + w1 * u1[ch];
      a1[ch] = s.conv0_b[ch] + w0 * u1[ch] + w1 * u[ch];
    }
    for (int ch = 0; ch < C; ++ch) {
      const int g0 = ch / d * d;
      const float* wc = s.conv1_w + size_t(ch) * d * 2;
      float s0 = 0.0f, s1 = 0.0f;
      for (int j = 0; j < d; ++j) {
        s0 += wc[2 * j] * a0[g0 + j];
        s1 += wc[2 * j + 1] * a1[g0 + j];
      }
      z[ch] = s0 + s1 + s.conv1_b[ch];
    }
    const float* q0 = u;
    const float* k0 = u + Dq;
    for (int h = 0; h < s.nq; ++h) {
      const float* kj = k0 + (h / g) * d;
      for (int i = 0; i < d; ++i) z[h * d + i] += 0.5f * (q0[h * d + i] + kj[i]);
    }
    for (int j = 0; j < s.nk; ++j)
      for (int i = 0; i < d; ++i) {
        float mean = 0.0f;
        for (int h = j * g; h < (j + 1) * g; ++h) mean += q0[h * d + i];
        mean /= float(g);
        z[Dq + j * d + i] += 0.5f * mean + 0.5f * k0[j * d + i];
      }
  }
}

void cca_decode_advance(float* window, float* v_prev, float* kv, const int64_t* kv_rows,
                        const float* qkn, const float* proj, const int32_t* slots,
                        const CcaDecodeStep& s) {
  const int Dq = s.nq * s.d, Dk = s.nk * s.d, C = Dq + Dk, P = C + Dk, half = Dk / 2;
  for (int r = 0; r < s.n; ++r) {
    const float* u = proj + size_t(r) * P;
    float* prev = v_prev + size_t(slots[r]) * half;
    if (kv_rows[2 * r] >= 0) {
      float* k_slot = kv + size_t(kv_rows[2 * r]) * Dk;
      float* v_slot = kv + size_t(kv_rows[2 * r + 1]) * Dk;
      std::memcpy(k_slot, qkn + size_t(r) * C + Dq, sizeof(float) * Dk);
      std::memcpy(v_slot, u + C, sizeof(float) * half);
      std::memcpy(v_slot + half, prev, sizeof(float) * half);
    }
    float* w = window + size_t(slots[r]) * 2 * C;
    std::memmove(w, w + C, sizeof(float) * C);
    std::memcpy(w + C, u, sizeof(float) * C);
    std::memcpy(prev, u + C + half, sizeof(float) * half);
  }
}

void kv_attention_partials(float* max, float* sum, float* out, float* scores, const float* q,
                           const PagedKv& kv, int n, int nq, int nk, int d) {
  const int g = nq / nk, Dk = nk * d, Dq = nq * d, bs = kv.block_size;
  const float scale = float(1.0 / std::sqrt(double(d)));
  const size_t stride = size_t(kv.max_blocks) * bs;
  // The blocks a row reads, in position order: fn(block, positions in it).
  const auto for_each_held = [&](int r, auto&& fn) {
    for (int i = 0; i < kv.max_blocks; ++i) {
      const int count = kv.counts[size_t(r) * kv.max_blocks + i];
      if (count <= 0) break;
      fn(kv.blocks[size_t(r) * kv.max_blocks + i], count);
    }
  };
  // One (row, query head) per work item: each is computed by the same code whatever the batch.
  // Small steps (short contexts of a small model) on one thread (see rows_matmul_forward).
  int64_t held = 0;
  for (int r = 0; r < n; ++r) for_each_held(r, [&](int, int count) { held += count; });
#pragma omp parallel for schedule(dynamic, 1) if (worth_threads(held * nq * d, int64_t(1) << 16))
  for (int item = 0; item < n * nq; ++item) {
    const int r = item / nq, h = item % nq, j = h / g;
    const float* qh = q + size_t(r) * Dq + size_t(h) * d;
    float* o = out + size_t(item) * d;
    std::fill(o, o + d, 0.0f);
    // Scores of every held position, in position order, then max, exponentials and the sum.
    float* score = scores + size_t(item) * stride;
    size_t held = 0;
    for_each_held(r, [&](int32_t block, int count) {
      const float* keys = kv.keys + size_t(block) * size_t(kv.block_stride);
      for (int p = 0; p < count; ++p) {
        const float* k = keys + size_t(p) * Dk + size_t(j) * d;
        float dot = 0.0f;
        for (int x = 0; x < d; ++x) dot += qh[x] * k[x];
        score[held++] = dot * scale;
      }
    });
    if (held == 0) {
      max[item] = -INFINITY;
      sum[item] = 0.0f;
      continue;
    }
    float mx = -INFINITY;
    for (size_t p = 0; p < held; ++p) mx = std::max(mx, score[p]);
    float total = 0.0f;
    for (size_t p = 0; p < held; ++p) total += score[p] = fast_exp(score[p] - mx);
    size_t at = 0;
    for_each_held(r, [&](int32_t block, int count) {
      const float* values =
          kv.keys + size_t(block) * size_t(kv.block_stride) + size_t(kv.values_offset);
      for (int p = 0; p < count; ++p, ++at) {
        const float* v = values + size_t(p) * Dk + size_t(j) * d;
        for (int x = 0; x < d; ++x) o[x] += score[at] * v[x];
      }
    });
    max[item] = mx;
    sum[item] = total;
  }
}

void kv_attention_normalize(float* att, const float* sum, const float* out, int items, int d) {
  for (size_t it = 0; it < size_t(items); ++it) {
    const float inv = 1.0f / sum[it];
    for (int x = 0; x < d; ++x) att[it * d + x] = out[it * d + x] * inv;
  }
}

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
ZAYA_CPU_TARGET_END
