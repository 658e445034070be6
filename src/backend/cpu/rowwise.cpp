#include "backend/cpu/rowwise.h"

#include <cstddef>

namespace zaya::cpu {

namespace {

constexpr int kLanes = 16;      // running sums per dot product (one zmm, two ymm)
constexpr int kWeightRows = 4;  // weight rows sharing one pass over an input row

// Lane sums of a dot product over k: lane j adds a[i]·b[i] for i ≡ j (mod 16), in order of i.
// Every dot product of this file goes through this loop body (inlined into each caller with the
// same operations), then through finish().
inline void accumulate(float (&acc)[kLanes], const float* a, const float* b, int k) {
  int i = 0;
  for (; i + kLanes <= k; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] += a[i + j] * b[i + j];
  for (int j = 0; i + j < k; ++j) acc[j] += a[i + j] * b[i + j];
}

// The lanes summed by a fixed pairwise tree: 16 → 8 → 4 → 2 → 1.
inline float finish(float (&acc)[kLanes]) {
  for (int width = kLanes / 2; width >= 1; width /= 2)
    for (int j = 0; j < width; ++j) acc[j] += acc[j + width];
  return acc[0];
}

}  // namespace

float fixed_order_dot(const float* a, const float* b, int k) {
  float acc[kLanes] = {};
  accumulate(acc, a, b, k);
  return finish(acc);
}

void rows_matmul_forward(float* out, const float* in, const float* w, const float* bias, int n,
                         int k, int m) {
  if (n <= 0 || m <= 0) return;
  // Blocks of weight rows are the unit of work (and of parallelism): a block stays in cache while
  // every input row passes over it. The blocking never depends on n, so an output element is
  // computed the same way in every call.
  const int blocks = (m + kWeightRows - 1) / kWeightRows;
#pragma omp parallel for schedule(static)
  for (int blk = 0; blk < blocks; ++blk) {
    const int o0 = blk * kWeightRows;
    const int rows = m - o0 < kWeightRows ? m - o0 : kWeightRows;
    for (int r = 0; r < n; ++r) {
      const float* x = in + size_t(r) * k;
      for (int o = o0; o < o0 + rows; ++o) {
        float acc[kLanes] = {};
        accumulate(acc, x, w + size_t(o) * k, k);
        out[size_t(r) * m + o] = finish(acc) + (bias ? bias[o] : 0.0f);
      }
    }
  }
}

}  // namespace zaya::cpu
