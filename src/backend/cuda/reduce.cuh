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

// Sums over all rows per column (the weight and bias gradients): a block takes kColumnTile
// adjacent columns (a warp reads adjacent elements of a row) and splits the rows among
// kRowLanes row lanes, launched as blocks_for(columns, kColumnTile) blocks of kColumnThreads.
constexpr int kColumnTile = 32;
constexpr int kRowLanes = 8;
constexpr int kColumnThreads = kColumnTile * kRowLanes;

// This thread's column of its block's tile.
__device__ inline long tile_column() {
  return long(blockIdx.x) * kColumnTile + long(threadIdx.x) % kColumnTile;
}

// sums[k] = Σ over rows of the terms term(row, sums) adds, for this thread's column, in one
// order whatever the timing: row lane y = threadIdx.x / kColumnTile adds rows y, y + kRowLanes,
// ... in order (fp64), then a shared-memory tree adds the lanes pairwise (y += y + 4, then y + 2,
// then y + 1). Every thread of the block calls it (it has barriers), with active false where its
// column is past the end; the totals are in row lane 0, where it returns true.
template <int N, typename Term>
__device__ inline bool column_sums(double (&sums)[N], long rows, bool active, Term term) {
  __shared__ double shared[N][kColumnThreads];
  const int lane = int(threadIdx.x) / kColumnTile;
  for (int k = 0; k < N; ++k) sums[k] = 0.0;
  if (active)
    for (long r = lane; r < rows; r += kRowLanes) term(r, sums);
  for (int k = 0; k < N; ++k) shared[k][threadIdx.x] = sums[k];
  __syncthreads();
  for (int s = kRowLanes / 2; s > 0; s /= 2) {
    if (lane < s)
      for (int k = 0; k < N; ++k)
        shared[k][threadIdx.x] += shared[k][threadIdx.x + s * kColumnTile];
    __syncthreads();
  }
  for (int k = 0; k < N; ++k) sums[k] = shared[k][threadIdx.x];
  __syncthreads();  // shared is free again
  return lane == 0 && active;
}

namespace {
// out[j] += Σ_i in[i, j] over rows, fp64 (the bias gradients), by column_sums.
__global__ void add_column_sums_kernel(float* out, const float* in, long rows, int cols) {
  const long j = tile_column();
  double s[1];
  if (column_sums(s, rows, j < cols,
                  [&](long r, auto& acc) { acc[0] += in[size_t(r) * cols + j]; }))
    out[j] += float(s[0]);
}
}  // namespace

inline void add_column_sums(float* out, const float* in, long rows, int cols) {
  if (cols <= 0) return;
  ZAYA_LAUNCH(add_column_sums_kernel, blocks_for(cols, kColumnTile), kColumnThreads, 0, 0)
  (out, in, rows, cols);
  ZAYA_CUDA_LAUNCHED("add_column_sums");
}

}  // namespace zaya::cuda
