#include "backend/cuda/ops.h"
#include "backend/cuda/reduce.cuh"

namespace zaya::cuda {

namespace {

// One block per row: the row's sum of squares in fp64, as cpu::rmsnorm_forward.
__global__ void rmsnorm_forward_kernel(float* out, float* rstd, const float* in, const float* w,
                                       int c, float eps) {
  __shared__ double shared[kRowThreads];
  const size_t row = size_t(blockIdx.x) * c;
  double ss = 0.0;
  for (int j = threadIdx.x; j < c; j += kRowThreads) ss += double(in[row + j]) * in[row + j];
  ss = block_sum(ss, shared);
  const float r = float(1.0 / sqrt(ss / c + eps));
  for (int j = threadIdx.x; j < c; j += kRowThreads) out[row + j] = in[row + j] * r * w[j];
  if (rstd && threadIdx.x == 0) rstd[blockIdx.x] = r;
}

__global__ void rmsnorm_backward_input_kernel(float* din, const float* dout, const float* in,
                                              const float* w, const float* rstd, int c) {
  __shared__ double shared[kRowThreads];
  const size_t row = size_t(blockIdx.x) * c;
  const double r = rstd[blockIdx.x];
  double dot = 0.0;  // Σ dy·w·x
  for (int j = threadIdx.x; j < c; j += kRowThreads)
    dot += double(dout[row + j]) * w[j] * in[row + j];
  dot = block_sum(dot, shared);
  const double coef = r * r * r * dot / c;
  for (int j = threadIdx.x; j < c; j += kRowThreads)
    din[row + j] += float(r * dout[row + j] * w[j] - coef * in[row + j]);
}

// One thread per column, rows in order: dw[j] += Σ_i dy·x·rstd (adjacent threads read adjacent
// columns, so every row's read is coalesced).
__global__ void rmsnorm_backward_weight_kernel(float* dw, const float* dout, const float* in,
                                               const float* rstd, int n, int c) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= c) return;
  double sum = 0.0;
  for (int i = 0; i < n; ++i)
    sum += double(dout[size_t(i) * c + j]) * in[size_t(i) * c + j] * rstd[i];
  dw[j] += float(sum);
}

}  // namespace

void rmsnorm_forward(float* out, float* rstd, const float* in, const float* w, int n, int c,
                     float eps) {
  if (n == 0) return;
  rmsnorm_forward_kernel<<<n, kRowThreads>>>(out, rstd, in, w, c, eps);
  ZAYA_CUDA_LAUNCHED("rmsnorm_forward");
}

void rmsnorm_backward(float* din, float* dw, const float* dout, const float* in, const float* w,
                      const float* rstd, int n, int c) {
  if (n == 0) return;
  if (din) {
    rmsnorm_backward_input_kernel<<<n, kRowThreads>>>(din, dout, in, w, rstd, c);
    ZAYA_CUDA_LAUNCHED("rmsnorm_backward (input)");
  }
  if (dw) {
    rmsnorm_backward_weight_kernel<<<blocks_for(c, 128), 128>>>(dw, dout, in, rstd, n, c);
    ZAYA_CUDA_LAUNCHED("rmsnorm_backward (weight)");
  }
}

}  // namespace zaya::cuda
