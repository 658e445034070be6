// Row and element moves of the model's steps (Backend's copy_rows, fill, add_into). The
// embedding's ops are in embedding.cu and bf16_storage.cu.
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

}  // namespace

void copy_rows(float* dst, size_t dst_stride, const float* src, size_t src_stride, int rows,
               int width) {
  const long total = long(rows) * width;
  if (total == 0) return;
  ZAYA_LAUNCH(copy_rows_kernel, blocks_for(total, 256), 256, 0, 0)
  (dst, dst_stride, src, src_stride, total, width);
  ZAYA_CUDA_LAUNCHED("copy_rows");
}

void fill(float* dst, size_t n, float value) {
  if (n == 0) return;
  ZAYA_LAUNCH(fill_kernel, blocks_for(long(n), 256), 256, 0, 0)(dst, long(n), value);
  ZAYA_CUDA_LAUNCHED("fill");
}

void add_into(float* dst, const float* src, size_t n) {
  if (n == 0) return;
  ZAYA_LAUNCH(add_into_kernel, blocks_for(long(n), 256), 256, 0, 0)(dst, src, long(n));
  ZAYA_CUDA_LAUNCHED("add_into");
}

}  // namespace zaya::cuda
