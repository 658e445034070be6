#include "backend/cuda/ops.h"
#include "backend/cuda/reduce.cuh"

namespace zaya::cuda {

namespace {

__device__ inline float sigmoid(float x) {
  return 1.0f / (1.0f + expf(-x));
}

// One thread per output element (row r, column j of f): gate in[r, j], value in[r, f + j].
__global__ void swiglu_forward_kernel(float* out, const float* in, long total, int f) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const long r = i / f, j = i % f;
  const float g = in[r * 2 * f + j], u = in[r * 2 * f + f + j];
  out[i] = g * sigmoid(g) * u;
}

__global__ void swiglu_backward_kernel(float* din, const float* dout, const float* in, long total,
                                       int f) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const long r = i / f, j = i % f;
  const float g = in[r * 2 * f + j], u = in[r * 2 * f + f + j], dy = dout[i];
  const float s = sigmoid(g), silu = g * s;
  din[r * 2 * f + f + j] += dy * silu;
  din[r * 2 * f + j] += dy * u * s * (1.0f + g * (1.0f - s));
}

// One thread per row (the router's softmax has a handful of columns).
__global__ void softmax_forward_kernel(float* out, const float* in, int n, int c) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= n) return;
  const float* x = in + size_t(r) * c;
  float* y = out + size_t(r) * c;
  float mx = x[0];
  for (int j = 1; j < c; ++j) mx = fmaxf(mx, x[j]);
  float sum = 0.0f;
  for (int j = 0; j < c; ++j) {
    y[j] = expf(x[j] - mx);
    sum += y[j];
  }
  const float inv = 1.0f / sum;
  for (int j = 0; j < c; ++j) y[j] *= inv;
}

__global__ void softmax_backward_kernel(float* din, const float* dout, const float* out, int n,
                                        int c) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= n) return;
  const float* y = out + size_t(r) * c;
  const float* dy = dout + size_t(r) * c;
  float dot = 0.0f;
  for (int j = 0; j < c; ++j) dot += dy[j] * y[j];
  for (int j = 0; j < c; ++j) din[size_t(r) * c + j] += y[j] * (dy[j] - dot);
}

}  // namespace

void softmax_forward(float* out, const float* in, int n, int c) {
  if (n == 0) return;
  ZAYA_LAUNCH(softmax_forward_kernel, blocks_for(n, 128), 128, 0, 0)(out, in, n, c);
  ZAYA_CUDA_LAUNCHED("softmax_forward");
}

void softmax_backward(float* din, const float* dout, const float* out, int n, int c) {
  if (n == 0 || !din) return;
  ZAYA_LAUNCH(softmax_backward_kernel, blocks_for(n, 128), 128, 0, 0)(din, dout, out, n, c);
  ZAYA_CUDA_LAUNCHED("softmax_backward");
}

void swiglu_forward(float* out, const float* in, int n, int f) {
  const long total = long(n) * f;
  if (total == 0) return;
  ZAYA_LAUNCH(swiglu_forward_kernel, blocks_for(total, 256), 256, 0, 0)(out, in, total, f);
  ZAYA_CUDA_LAUNCHED("swiglu_forward");
}

void swiglu_backward(float* din, const float* dout, const float* in, int n, int f) {
  const long total = long(n) * f;
  if (total == 0 || !din) return;
  ZAYA_LAUNCH(swiglu_backward_kernel, blocks_for(total, 256), 256, 0, 0)(din, dout, in, total, f);
  ZAYA_CUDA_LAUNCHED("swiglu_backward");
}

}  // namespace zaya::cuda
