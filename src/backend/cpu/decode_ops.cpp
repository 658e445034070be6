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

namespace {

// Vectors of the path's own width (cpu_path_target.h), as in rowwise.cpp: a wider GCC vector would
// live in memory on a narrower path.
constexpr int kWidth = ZAYA_CPU_VECTOR_FLOATS;
typedef float Vec __attribute__((vector_size(kWidth * sizeof(float))));
typedef float UnalignedVec
    __attribute__((vector_size(kWidth * sizeof(float)), aligned(4), may_alias));

// The slice of a head's values whose weighted sums are held in registers across positions.
constexpr int kSlice = 32;
constexpr int kSliceParts = kSlice / kWidth;

// acc[x] += weight · v[x] for x < kSlice: the multiply, then the add, per lane (no fused
// multiply-add: every path gives the bits of the scalar loop).
inline void add_weighted(Vec (&acc)[kSliceParts], float weight, const float* v) {
  Vec w;
  for (int i = 0; i < kWidth; ++i) w[i] = weight;
  for (int q = 0; q < kSliceParts; ++q)
    acc[q] += w * *reinterpret_cast<const UnalignedVec*>(v + q * kWidth);
}

}  // namespace

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
    // Scores of every held position, in position order, then max, exponentials and the sum.
    float* score = scores + size_t(item) * stride;
    size_t held = 0;
    for_each_held(r, [&](int32_t block, int count) {
      const float* keys = kv.keys + size_t(block) * size_t(kv.block_stride);
      // Each score is one sum over x in order, whose additions wait on each other: eight
      // positions' sums side by side keep the adders busy (one at a time, a score cost d add
      // latencies; this was a quarter of a batch-16 decode step of the small config).
      constexpr int kSide = 8;
      int p = 0;
      for (; p + kSide <= count; p += kSide) {
        const float* k = keys + size_t(p) * Dk + size_t(j) * d;
        float dot[kSide] = {};
        for (int x = 0; x < d; ++x)
          for (int i = 0; i < kSide; ++i) dot[i] += qh[x] * k[size_t(i) * Dk + x];
        for (int i = 0; i < kSide; ++i) score[held++] = dot[i] * scale;
      }
      for (; p < count; ++p) {
        const float* k = keys + size_t(p) * Dk + size_t(j) * d;
        float dot = 0.0f;
        for (int x = 0; x < d; ++x) dot += qh[x] * k[x];
        score[held++] = dot * scale;
      }
    });
    if (held == 0) {
      std::fill(o, o + d, 0.0f);
      max[item] = -INFINITY;
      sum[item] = 0.0f;
      continue;
    }
    float mx = -INFINITY;
    for (size_t p = 0; p < held; ++p) mx = std::max(mx, score[p]);
    float total = 0.0f;
    for (size_t p = 0; p < held; ++p) total += score[p] = fast_exp(score[p] - mx);
    // o[x] sums score · v[x] over the positions in order. The sums of a slice of x are held in a
    // local array across all positions, which the compiler keeps in registers; summed into o in
    // place, each position's additions waited on the previous one's store.
    for (int x0 = 0; x0 < d; x0 += kSlice) {
      const int width = std::min(kSlice, d - x0);
      Vec acc[kSliceParts] = {};
      float tail[kSlice] = {};
      const float* weight = score;
      // A plain loop, not for_each_held: captured by a lambda, acc would live on the stack.
      for (int i = 0; i < kv.max_blocks; ++i) {
        const int count = kv.counts[size_t(r) * kv.max_blocks + i];
        if (count <= 0) break;
        const float* v =
            kv.keys + size_t(kv.blocks[size_t(r) * kv.max_blocks + i]) * size_t(kv.block_stride) +
            size_t(kv.values_offset) + size_t(j) * d + x0;
        for (int p = 0; p < count; ++p, ++weight, v += Dk) {
          if (width == kSlice) {
            add_weighted(acc, *weight, v);
          } else {
            for (int x = 0; x < width; ++x) tail[x] += *weight * v[x];
          }
        }
      }
      if (width == kSlice) {
        std::memcpy(o + x0, acc, sizeof acc);
      } else {
        std::copy(tail, tail + width, o + x0);
      }
    }
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
