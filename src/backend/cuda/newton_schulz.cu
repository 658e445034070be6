// Muon's Newton–Schulz (backend/newton_schulz.h) on the GPU, over a batch of same-shape matrices:
// a layer's experts, or every attention projection of one shape. The matrices are stacked, and
// each of an iteration's three products is one strided-batched cuBLASLt GEMM over the stack, so
// sixteen 2048×2048 experts cost three launches per iteration instead of forty-eight. The steps
// are the CPU's: the fp64 Frobenius norm, X = G / (‖G‖ + 1e-7) in the wide orientation, then
// A = X Xᵀ, B = b·A + c·A², X ← a·X + B X.
#include <utility>

#include "backend/cuda/device.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/ops.h"
#include "backend/cuda/reduce.cuh"
#include "backend/newton_schulz.h"

namespace zaya::cuda {

namespace {

// The stack and the iteration's buffers, grown as needed and reused: the ops run in order on one
// stream, so one set serves every call.
struct NsScratch {
  DeviceBuffer<float> x, y, gram, poly;
  DeviceBuffer<double> sum_sq;
};

// Σ g² of each matrix of the stack (one block per matrix, a fixed order).
__global__ void frobenius_kernel(double* sum_sq, const float* stack, int64_t size) {
  __shared__ double shared[kRowThreads];
  const float* g = stack + int64_t(blockIdx.x) * size;
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < size; i += kRowThreads) s += double(g[i]) * double(g[i]);
  s = block_sum(s, shared);
  if (threadIdx.x == 0) sum_sq[blockIdx.x] = s;
}

// x = g / (‖g‖ + 1e-7), each matrix [rows, cols] written as [cols, rows] when transposed.
__global__ void normalise_kernel(float* x, const float* g, const double* sum_sq, int64_t rows,
                                 int64_t cols, bool transposed, int64_t total) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= total) return;
  const int64_t size = rows * cols, b = j / size, e = j % size;
  const float denom = float(sqrt(sum_sq[b]) + 1e-7);
  const int64_t to = transposed ? b * size + (e % cols) * rows + e / cols : j;
  x[to] = g[j] / denom;
}

// The inverse of normalise_kernel's layout change: g[b][r, c] = x[b][c, r] when transposed.
__global__ void unstack_kernel(float* g, const float* x, int64_t rows, int64_t cols,
                               bool transposed, int64_t total) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= total) return;
  const int64_t size = rows * cols, b = j / size, e = j % size;
  g[j] = transposed ? x[b * size + (e % cols) * rows + e / cols] : x[j];
}

// Row-major C[M, N] = alpha · op(A) · op(B) + beta · C for each matrix of the stacks: the
// column-major Cᵀ = op(B)ᵀ · op(A)ᵀ, whose operands are the row-major storages as they are.
void row_major_gemm(bool ta, bool tb, int M, int N, int K, float alpha, const float* A,
                    int64_t stride_a, const float* B, int64_t stride_b, float beta, float* C,
                    int64_t stride_c, int count) {
  // One matrix: no strides, so that they do not lower the alignment cuBLASLt is told.
  const GemmBatch batch = count > 1 ? GemmBatch{count, stride_b, stride_a, stride_c} : GemmBatch{};
  gemm_f32_batched(tb, ta, N, M, K, alpha, B, tb ? K : N, A, ta ? M : K, beta, C, N, batch);
}

}  // namespace

void newton_schulz_batch(float* const* matrices, int count, int64_t rows, int64_t cols, int steps) {
  if (count == 0) return;
  ZAYA_CHECK(rows > 0 && cols > 0, "newton_schulz_batch: empty matrices [", rows, ", ", cols, "]");
  static NsScratch s;
  const bool transposed = rows > cols;
  const int64_t m = transposed ? cols : rows, n = transposed ? rows : cols;  // m ≤ n
  const int64_t size = m * n, total = size * count;
  float* g = grown(s.y, size_t(total));  // the gathered inputs, then the iteration's other half
  for (int k = 0; k < count; ++k)
    copy_on_device(g + k * size, matrices[k], sizeof(float) * size_t(size));
  double* sum_sq = grown(s.sum_sq, size_t(count));
  ZAYA_LAUNCH(frobenius_kernel, unsigned(count), kRowThreads, 0, 0)(sum_sq, g, size);
  ZAYA_CUDA_LAUNCHED("newton_schulz_batch (norms)");
  float* x = grown(s.x, size_t(total));
  ZAYA_LAUNCH(normalise_kernel, blocks_for(long(total), 256), 256, 0, 0)
  (x, g, sum_sq, rows, cols, transposed, total);
  ZAYA_CUDA_LAUNCHED("newton_schulz_batch (normalise)");
  float* y = g;
  float* gram = grown(s.gram, size_t(m * m) * count);
  float* poly = grown(s.poly, size_t(m * m) * count);
  const NsCoefficients coef;
  const int mi = int(m), ni = int(n);
  for (int step = 0; step < steps; ++step) {
    row_major_gemm(false, true, mi, mi, ni, 1.0f, x, size, x, size, 0.0f, gram, m * m, count);
    copy_on_device(poly, gram, sizeof(float) * size_t(m * m) * count);
    row_major_gemm(false, false, mi, mi, mi, coef.c, gram, m * m, gram, m * m, coef.b, poly, m * m,
                   count);  // b·A + c·A²
    copy_on_device(y, x, sizeof(float) * size_t(total));
    row_major_gemm(false, false, mi, ni, mi, 1.0f, poly, m * m, x, size, coef.a, y, size,
                   count);  // a·X + B X
    std::swap(x, y);
  }
  // The result back into each matrix, in its own orientation (through the free half).
  float* out = x == s.x.get() ? s.y.get() : s.x.get();
  ZAYA_LAUNCH(unstack_kernel, blocks_for(long(total), 256), 256, 0, 0)
  (out, x, rows, cols, transposed, total);
  ZAYA_CUDA_LAUNCHED("newton_schulz_batch (unstack)");
  for (int k = 0; k < count; ++k)
    copy_on_device(matrices[k], out + k * size, sizeof(float) * size_t(size));
}

}  // namespace zaya::cuda
