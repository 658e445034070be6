// The global gradient norm in a fixed order (Optimizer's clipping): a fixed grid in which thread
// i always takes elements i, i + threads, …, block sums in a fixed tree, and the blocks' partial
// sums added on the host in block order, so the norm has the same bits on every run.
#include <vector>

#include "backend/cuda/device.h"
#include "backend/cuda/ops.h"
#include "backend/cuda/reduce.cuh"

namespace zaya::cuda {

namespace {

constexpr int kBlocks = 256;

__global__ void sum_of_squares_kernel(double* partial, const float* x, long n) {
  __shared__ double shared[kRowThreads];
  double s = 0.0;
  for (long i = long(blockIdx.x) * kRowThreads + threadIdx.x; i < n;
       i += long(kBlocks) * kRowThreads)
    s += double(x[i]) * x[i];
  s = block_sum(s, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void scale_kernel(float* x, long n, float s) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= s;
}

}  // namespace

double sum_of_squares(const float* x, long n) {
  if (n == 0) return 0.0;
  DeviceBuffer<double> partial{size_t(kBlocks)};
  sum_of_squares_kernel<<<kBlocks, kRowThreads>>>(partial.get(), x, n);
  ZAYA_CUDA_LAUNCHED("sum_of_squares");
  double total = 0.0;
  for (const double p : partial.download()) total += p;  // block order
  return total;
}

void scale_in_place(float* x, long n, float s) {
  if (n == 0) return;
  scale_kernel<<<blocks_for(n, 256), 256>>>(x, n, s);
  ZAYA_CUDA_LAUNCHED("scale_in_place");
}

}  // namespace zaya::cuda
