#include "backend/cuda/device.h"
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

// dw[j] += Σ_i dy·x·rstd over the rows by column_sums (reduce.cuh).
__global__ void rmsnorm_backward_weight_kernel(float* dw, const float* dout, const float* in,
                                               const float* rstd, int n, int c) {
  const long j = tile_column();
  double sum[1];
  if (column_sums(sum, n, j < c, [&](long i, auto& acc) {
        acc[0] += double(dout[size_t(i) * c + j]) * in[size_t(i) * c + j] * rstd[i];
      }))
    dw[j] += float(sum[0]);
}

}  // namespace

void rmsnorm_forward(float* out, float* rstd, const float* in, const float* w, int n, int c,
                     float eps) {
  if (n == 0) return;
  ZAYA_LAUNCH(rmsnorm_forward_kernel, n, kRowThreads, 0, 0)(out, rstd, in, w, c, eps);
  ZAYA_CUDA_LAUNCHED("rmsnorm_forward");
}

void rmsnorm_backward(float* din, float* dw, const float* dout, const float* in, const float* w,
                      const float* rstd, int n, int c) {
  if (n == 0) return;
  if (din) {
    ZAYA_LAUNCH(rmsnorm_backward_input_kernel, n, kRowThreads, 0, 0)(din, dout, in, w, rstd, c);
    ZAYA_CUDA_LAUNCHED("rmsnorm_backward (input)");
  }
  if (dw) {
    ZAYA_LAUNCH(rmsnorm_backward_weight_kernel, blocks_for(c, kColumnTile), kColumnThreads, 0, 0)
    (dw, dout, in, rstd, n, c);
    ZAYA_CUDA_LAUNCHED("rmsnorm_backward (weight)");
  }
}

}  // namespace zaya::cuda

namespace zaya::cuda {

namespace {

// One thread per (row, head): CCA's query/key normalisation, no epsilon (cpu::l2norm_forward).
__global__ void l2norm_forward_kernel(float* out, float* inv_norm, const float* in,
                                      const float* temp, long rows, int heads, int d) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows) return;
  const int h = int(i % heads);
  const float* x = in + size_t(i) * d;
  double ss = 0.0;
  for (int j = 0; j < d; ++j) ss += double(x[j]) * x[j];
  const double inv = 1.0 / sqrt(ss);
  const float s = float(sqrt(double(d)) * inv * (temp ? temp[h] : 1.0f));
  for (int j = 0; j < d; ++j) out[size_t(i) * d + j] = x[j] * s;
  inv_norm[i] = float(inv);
}

__global__ void l2norm_backward_kernel(float* din, double* tsum, const float* dout, const float* in,
                                       const float* temp, const float* inv_norm, long rows,
                                       int heads, int d) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows) return;
  const int h = int(i % heads);
  const double sqrt_d = sqrt(double(d));
  const float* x = in + size_t(i) * d;
  const float* dy = dout + size_t(i) * d;
  const double inv = inv_norm[i];
  double dot = 0.0;  // x̂·dy
  for (int j = 0; j < d; ++j) dot += double(x[j]) * inv * dy[j];
  if (tsum) tsum[i] = sqrt_d * dot;
  if (din) {
    const double s = sqrt_d * (temp ? temp[h] : 1.0f);
    for (int j = 0; j < d; ++j)
      din[size_t(i) * d + j] += float(s * inv * (dy[j] - x[j] * inv * dot));
  }
}

// dtemp[h] += Σ over rows of the per-row terms, by column_sums (reduce.cuh).
__global__ void l2norm_temp_kernel(float* dtemp, const double* tsum, int n, int heads) {
  const long h = tile_column();
  double s[1];
  if (column_sums(s, n, h < heads,
                  [&](long r, auto& acc) { acc[0] += tsum[size_t(r) * heads + h]; }))
    dtemp[h] += float(s[0]);
}

}  // namespace

void l2norm_forward(float* out, float* inv_norm, const float* in, const float* temp, int n,
                    int heads, int d) {
  const long rows = long(n) * heads;
  if (rows == 0) return;
  ZAYA_LAUNCH(l2norm_forward_kernel, blocks_for(rows, 128), 128, 0, 0)
  (out, inv_norm, in, temp, rows, heads, d);
  ZAYA_CUDA_LAUNCHED("l2norm_forward");
}

void l2norm_backward(float* din, float* dtemp, const float* dout, const float* in,
                     const float* temp, const float* inv_norm, int n, int heads, int d) {
  const long rows = long(n) * heads;
  if (rows == 0) return;
  ScratchBuffer<double> tsum(dtemp ? size_t(rows) : 0);
  ZAYA_LAUNCH(l2norm_backward_kernel, blocks_for(rows, 128), 128, 0, 0)
  (din, tsum.get(), dout, in, temp, inv_norm, rows, heads, d);
  ZAYA_CUDA_LAUNCHED("l2norm_backward");
  if (dtemp) {
    ZAYA_LAUNCH(l2norm_temp_kernel, blocks_for(heads, kColumnTile), kColumnThreads, 0, 0)
    (dtemp, tsum.get(), n, heads);
    ZAYA_CUDA_LAUNCHED("l2norm_backward (temp)");
  }
}

}  // namespace zaya::cuda
