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
// Positions ahead whose values a weighted sum asks for (see side_scores).
constexpr int kValuesAhead = 8;

// acc[x] += weight · v[x] for x < kSlice: the multiply, then the add, per lane (no fused
// multiply-add: every path gives the bits of the scalar loop).
inline void add_weighted(Vec (&acc)[kSliceParts], float weight, const float* v) {
  Vec w;
  for (int i = 0; i < kWidth; ++i) w[i] = weight;
  for (int q = 0; q < kSliceParts; ++q)
    acc[q] += w * *reinterpret_cast<const UnalignedVec*>(v + q * kWidth);
}

// The attention's scores: kSide positions side by side in the lanes of one vector, each lane the
// same chain of additions over x as a lone score (8 lanes on the AVX2 and AVX-512 paths, 4 on the
// baseline's 16-byte registers).
constexpr int kSide = kWidth >= 8 ? 8 : 4;
typedef float SideVec __attribute__((vector_size(kSide * sizeof(float))));
typedef float UnalignedSideVec
    __attribute__((vector_size(kSide * sizeof(float)), aligned(4), may_alias));

// m[i][x] becomes m[x][i]: the rows of kSide keys read as vectors, turned into columns (one x
// of every key), by shuffles within registers.
inline void transpose(SideVec (&m)[kSide]) {
#if ZAYA_CPU_VECTOR_FLOATS >= 8
  SideVec t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = __builtin_shufflevector(m[i], m[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[i + 1] = __builtin_shufflevector(m[i], m[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int i = 0; i < 8; i += 4)
    for (int h = 0; h < 2; ++h) {
      u[i + 2 * h] = __builtin_shufflevector(t[i + h], t[i + 2 + h], 0, 1, 8, 9, 4, 5, 12, 13);
      u[i + 2 * h + 1] =
          __builtin_shufflevector(t[i + h], t[i + 2 + h], 2, 3, 10, 11, 6, 7, 14, 15);
    }
  for (int x = 0; x < 4; ++x) {
    m[x] = __builtin_shufflevector(u[x], u[x + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    m[x + 4] = __builtin_shufflevector(u[x], u[x + 4], 4, 5, 6, 7, 12, 13, 14, 15);
  }
#else
  const SideVec t0 = __builtin_shufflevector(m[0], m[1], 0, 4, 1, 5);
  const SideVec t1 = __builtin_shufflevector(m[0], m[1], 2, 6, 3, 7);
  const SideVec t2 = __builtin_shufflevector(m[2], m[3], 0, 4, 1, 5);
  const SideVec t3 = __builtin_shufflevector(m[2], m[3], 2, 6, 3, 7);
  m[0] = __builtin_shufflevector(t0, t2, 0, 1, 4, 5);
  m[1] = __builtin_shufflevector(t0, t2, 2, 3, 6, 7);
  m[2] = __builtin_shufflevector(t1, t3, 0, 1, 4, 5);
  m[3] = __builtin_shufflevector(t1, t3, 2, 3, 6, 7);
#endif
}

// The scores q · k_i of kSide keys (rows `key_stride` apart), each summed over x in order.
inline SideVec side_scores(const float* q, const float* k, size_t key_stride, int d) {
  // The keys two groups on: a row's keys come from memory every step (the experts' weights
  // pass through the caches between steps), and the prefetchers do not follow d-float slices
  // kv-head-count apart.
  for (int i = 0; i < kSide; ++i)
    for (int x = 0; x < d; x += 16)
      __builtin_prefetch(k + (size_t(2 * kSide) + size_t(i)) * key_stride + size_t(x));
  SideVec dot = {};
  int x = 0;
  for (; x + kSide <= d; x += kSide) {
    SideVec col[kSide];
    for (int i = 0; i < kSide; ++i)
      col[i] = *reinterpret_cast<const UnalignedSideVec*>(k + size_t(i) * key_stride + x);
    transpose(col);
    for (int t = 0; t < kSide; ++t) dot += q[x + t] * col[t];
  }
  for (; x < d; ++x) {
    SideVec col;
    for (int i = 0; i < kSide; ++i) col[i] = k[size_t(i) * key_stride + x];
    dot += q[x] * col;
  }
  return dot;
}

}  // namespace

void cca_decode_conv(float* z_out, const float* proj, const float* window, const int32_t* slots,
                     const CcaDecodeStep& s) {
  const int g = s.nq / s.nk, Dq = s.nq * s.d, Dk = s.nk * s.d, C = Dq + Dk, P = C + Dk;
  const int d = s.d;
  // The grouped convolution's sums run kSide channels side by side in the lanes of a vector
  // (each lane one channel's chain over j, as alone): its weights regrouped once per call so
  // that one tap of kSide channels is one vector, [ch / kSide][j][tap][ch % kSide]. Channel
  // blocks must not straddle head groups; where d is not a multiple of kSide they run alone.
  const bool sided = d % kSide == 0;
  std::vector<float> sided_w(sided ? size_t(C) * d * 2 : 0);
  if (sided)
    for (int ch = 0; ch < C; ++ch)
      for (int jt = 0; jt < 2 * d; ++jt)
        sided_w[(size_t(ch / kSide) * 2 * d + size_t(jt)) * kSide + size_t(ch % kSide)] =
            s.conv1_w[size_t(ch) * 2 * d + size_t(jt)];
        // Small steps on one thread (see rows_matmul_forward): about 2d + 6 multiply-adds a
        // channel.
#pragma omp parallel for schedule(static) if (worth_threads(int64_t(s.n) * C * d, int64_t(1) << 16))
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
    if (sided) {
      for (int c0 = 0; c0 < C; c0 += kSide) {
        const int g0 = c0 / d * d;
        const float* wb = sided_w.data() + size_t(c0) * 2 * d;
        SideVec s0 = {}, s1 = {};
        for (int j = 0; j < d; ++j) {
          s0 += *reinterpret_cast<const UnalignedSideVec*>(wb + size_t(2 * j) * kSide) * a0[g0 + j];
          s1 += *reinterpret_cast<const UnalignedSideVec*>(wb + size_t(2 * j + 1) * kSide) *
                a1[g0 + j];
        }
        const SideVec zc = s0 + s1 + *reinterpret_cast<const UnalignedSideVec*>(s.conv1_b + c0);
        std::memcpy(z + c0, &zc, sizeof zc);
      }
    } else {
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
      // Each score is one sum over x in order, whose additions wait on each other: kSide
      // positions' sums side by side, in the lanes of a vector, keep the adders busy (one at a
      // time, a score cost d add latencies; this was a quarter of a batch-16 decode step of the
      // small config, and a quarter again with the lanes summed as scalars).
      int p = 0;
      for (; p + kSide <= count; p += kSide) {
        const SideVec dot = side_scores(qh, keys + size_t(p) * Dk + size_t(j) * d, size_t(Dk), d);
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
            __builtin_prefetch(v + size_t(kValuesAhead) * size_t(Dk));
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
