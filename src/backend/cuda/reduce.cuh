// Block-wide sums in a fixed order: every thread's share is a fixed set of elements and the
// shared-memory tree always pairs the same slots, so a sum never depends on timing (no atomics).
#pragma once

#include "backend/cuda/vendor.h"

namespace zaya::cuda {

constexpr int kRowThreads = 256;  // threads of the one-block-per-row kernels (a power of two)

// Sum of `v` over the block (blockDim.x == kRowThreads); every thread gets the result.
__device__ inline double block_sum(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = kRowThreads / 2; s > 0; s /= 2) {
    if (int(threadIdx.x) < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  const double total = shared[0];
  __syncthreads();  // shared is reused by the caller's next sum
  return total;
}

// Sum over the warp's lanes by butterfly: every lane ends with the same total, added in the same
// order on every run.
__device__ inline float warp_sum(float v) {
  for (int o = ZAYA_WARP_SIZE / 2; o > 0; o /= 2) v += ZAYA_SHFL_XOR(v, o);
  return v;
}

// Largest of `v` over the block (blockDim.x == kRowThreads); max is exact, so any order is.
__device__ inline float block_max(float v, float* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = kRowThreads / 2; s > 0; s /= 2) {
    if (int(threadIdx.x) < s)
      shared[threadIdx.x] = fmaxf(shared[threadIdx.x], shared[threadIdx.x + s]);
    __syncthreads();
  }
  const float m = shared[0];
  __syncthreads();
  return m;
}

inline unsigned blocks_for(long n, int threads) {
  return unsigned((n + threads - 1) / threads);
}

namespace {
// out[j] += Σ_i in[i, j] over rows in order, fp64 (the bias gradients): one thread per column.
__global__ void add_column_sums_kernel(float* out, const float* in, long rows, int cols) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= cols) return;
  double s = 0.0;
  for (long r = 0; r < rows; ++r) s += in[size_t(r) * cols + j];
  out[j] += float(s);
}
}  // namespace

inline void add_column_sums(float* out, const float* in, long rows, int cols) {
  if (cols <= 0) return;
  ZAYA_LAUNCH(add_column_sums_kernel, blocks_for(cols, 128), 128, 0, 0)(out, in, rows, cols);
  ZAYA_CUDA_LAUNCHED("add_column_sums");
}

}  // namespace zaya::cuda
