// Cross-entropy over the vocabulary (cpu::cross_entropy_*): one block per row, the row's max and
// fp64 sum of exponentials reduced in a fixed tree. The step's loss is the sum of the row losses
// in row order, done on the host after one explicit copy of n values.
#include <vector>

#include "backend/cuda/device.h"
#include "backend/cuda/ops.h"
#include "backend/cuda/reduce.cuh"

namespace zaya::cuda {

namespace {

__global__ void cross_entropy_forward_kernel(float* lse, double* row_loss, const float* logits,
                                             const int* targets, int vocab) {
  __shared__ float shared_max[kRowThreads];
  __shared__ double shared_sum[kRowThreads];
  const float* x = logits + size_t(blockIdx.x) * vocab;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < vocab; j += kRowThreads) mx = fmaxf(mx, x[j]);
  mx = block_max(mx, shared_max);
  double sum = 0.0;
  for (int j = threadIdx.x; j < vocab; j += kRowThreads) sum += expf(x[j] - mx);
  sum = block_sum(sum, shared_sum);
  if (threadIdx.x == 0) {
    const int t = targets[blockIdx.x];
    lse[blockIdx.x] = float(mx + log(sum));
    row_loss[blockIdx.x] = t == kIgnoreIndex ? 0.0 : double(mx) + log(sum) - x[t];
  }
}

__global__ void cross_entropy_backward_kernel(float* logits, const float* lse, const int* targets,
                                              int vocab, float scale) {
  float* x = logits + size_t(blockIdx.x) * vocab;
  const int t = targets[blockIdx.x];
  const float l = lse[blockIdx.x];
  for (int j = threadIdx.x; j < vocab; j += kRowThreads)
    x[j] = t == kIgnoreIndex ? 0.0f : scale * expf(x[j] - l) - (j == t ? scale : 0.0f);
}

}  // namespace

double sum_row_losses(const double* row_loss, const int32_t* targets, int n, int64_t* count) {
  std::vector<double> losses(static_cast<size_t>(n));
  std::vector<int32_t> t(static_cast<size_t>(n));
  copy_to_host(losses.data(), row_loss, losses.size() * sizeof(double));  // explicit copies
  copy_to_host(t.data(), targets, t.size() * sizeof(int32_t));
  double total = 0.0;
  *count = 0;
  for (int r = 0; r < n; ++r) {  // row order: deterministic
    total += losses[size_t(r)];
    *count += t[size_t(r)] != kIgnoreIndex;
  }
  return total;
}

double cross_entropy_forward(float* lse, const float* logits, const int32_t* targets, int n,
                             int vocab, int64_t* count) {
  *count = 0;
  if (n == 0) return 0.0;
  ScratchBuffer<double> row_loss{size_t(n)};
  ZAYA_LAUNCH(cross_entropy_forward_kernel, n, kRowThreads, 0, 0)
  (lse, row_loss.get(), logits, targets, vocab);
  ZAYA_CUDA_LAUNCHED("cross_entropy_forward");
  return sum_row_losses(row_loss.get(), targets, n, count);
}

void cross_entropy_backward_inplace(float* logits, const float* lse, const int32_t* targets, int n,
                                    int vocab, float loss_scale) {
  if (n == 0) return;
  ZAYA_LAUNCH(cross_entropy_backward_kernel, n, kRowThreads, 0, 0)
  (logits, lse, targets, vocab, loss_scale);
  ZAYA_CUDA_LAUNCHED("cross_entropy_backward_inplace");
}

}  // namespace zaya::cuda
