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

inline unsigned blocks_for(long n, int threads) {
  return unsigned((n + threads - 1) / threads);
}

}  // namespace zaya::cuda
