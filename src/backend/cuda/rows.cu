// Row and element moves of the model's steps (Backend's copy_rows, fill, add_into) and the
// embedding. The embedding's backward adds each token's row into the table in token order:
// tokens repeat, so one thread per column walks the tokens in order (each element of the table
// has one writer and one order; a sort of the tokens by id is the faster form).
#include "backend/cuda/ops.h"
#include "backend/cuda/reduce.cuh"

namespace zaya::cuda {

namespace {

__global__ void copy_rows_kernel(float* dst, size_t dst_stride, const float* src, size_t src_stride,
                                 long total, int width) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const long r = i / width, j = i % width;
  dst[size_t(r) * dst_stride + j] = src[size_t(r) * src_stride + j];
}

__global__ void fill_kernel(float* dst, long n, float value) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = value;
}

__global__ void add_into_kernel(float* dst, const float* src, long n) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] += src[i];
}

__global__ void embedding_backward_kernel(float* dtable, const float* dout, const int* tokens,
                                          int n, int e) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= e) return;
  for (int t = 0; t < n; ++t) dtable[size_t(tokens[t]) * e + j] += dout[size_t(t) * e + j];
}

}  // namespace

void copy_rows(float* dst, size_t dst_stride, const float* src, size_t src_stride, int rows,
               int width) {
  const long total = long(rows) * width;
  if (total == 0) return;
  copy_rows_kernel<<<blocks_for(total, 256), 256>>>(dst, dst_stride, src, src_stride, total, width);
  ZAYA_CUDA_LAUNCHED("copy_rows");
}

void fill(float* dst, size_t n, float value) {
  if (n == 0) return;
  fill_kernel<<<blocks_for(long(n), 256), 256>>>(dst, long(n), value);
  ZAYA_CUDA_LAUNCHED("fill");
}

void add_into(float* dst, const float* src, size_t n) {
  if (n == 0) return;
  add_into_kernel<<<blocks_for(long(n), 256), 256>>>(dst, src, long(n));
  ZAYA_CUDA_LAUNCHED("add_into");
}

void embedding_backward(float* dtable, const float* dout, const int32_t* tokens, int n, int e) {
  if (n == 0 || e == 0) return;
  embedding_backward_kernel<<<blocks_for(e, 128), 128>>>(dtable, dout, tokens, n, e);
  ZAYA_CUDA_LAUNCHED("embedding_backward");
}

}  // namespace zaya::cuda
