// The tied LM head and the cross-entropy, fused and chunked (cpu::lm_head_loss_*): one
// [chunk_tokens × chunk_vocab] block of logits at a time, made by the cuBLASLt matmul; the
// vocabulary chunks update each row's running max and fp64 sum of exponentials in order, so no
// [tokens × vocab] buffer exists (ZAYA1's vocabulary is 262,272). The backward recomputes each
// block, turns it into dlogits in place and adds its two products.
#include <algorithm>
#include <cmath>

#include "backend/cuda/device.h"
#include "backend/cuda/ops.h"
#include "backend/cuda/reduce.cuh"

namespace zaya::cuda {

namespace {

// One block per row of the logits block: fold it into the row's running max and sum.
__global__ void online_lse_kernel(float* mx, double* sum, float* target_logit, const float* block,
                                  const int* targets, int t0, int v0, int vn) {
  __shared__ float shared_max[kRowThreads];
  __shared__ double shared_sum[kRowThreads];
  const int t = t0 + int(blockIdx.x);
  const float* x = block + size_t(blockIdx.x) * vn;
  float m = mx[t];
  for (int j = threadIdx.x; j < vn; j += kRowThreads) m = fmaxf(m, x[j]);
  m = block_max(m, shared_max);
  double s = 0.0;
  for (int j = threadIdx.x; j < vn; j += kRowThreads) s += expf(x[j] - m);
  s = block_sum(s, shared_sum);
  if (threadIdx.x == 0) {
    // Rescale the running sum to the new max (exp(−inf) = 0 for the first block).
    sum[t] = sum[t] * exp(double(mx[t]) - double(m)) + s;
    mx[t] = m;
    const int target = targets[t];
    if (target != kIgnoreIndex && target >= v0 && target < v0 + vn)
      target_logit[t] = x[target - v0];
  }
}

__global__ void finish_lse_kernel(float* lse, double* row_loss, const float* mx, const double* sum,
                                  const float* target_logit, const int* targets, int n) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  const double l = double(mx[t]) + log(sum[t]);
  lse[t] = float(l);
  row_loss[t] = targets[t] == kIgnoreIndex ? 0.0 : l - target_logit[t];
}

__global__ void init_kernel(float* mx, double* sum, float* target_logit, int n) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  mx[t] = -INFINITY;
  sum[t] = 0.0;
  target_logit[t] = 0.0f;
}

// The block becomes dlogits = scale·(softmax − onehot); ignored rows become zero.
__global__ void dlogits_kernel(float* block, const float* lse, const int* targets, int t0, int v0,
                               int vn, float scale) {
  const int t = t0 + int(blockIdx.x);
  float* x = block + size_t(blockIdx.x) * vn;
  const int target = targets[t];
  const float l = lse[t];
  for (int j = threadIdx.x; j < vn; j += kRowThreads)
    x[j] =
        target == kIgnoreIndex ? 0.0f : scale * expf(x[j] - l) - (v0 + j == target ? scale : 0.0f);
}

}  // namespace

double lm_head_loss_forward(float* lse, const float* y, WeightRef w, const int32_t* targets, int n,
                            int e, int v, int chunk_tokens, int chunk_vocab, float* scratch,
                            int64_t* count) {
  ZAYA_CHECK(chunk_tokens > 0 && chunk_vocab > 0, "lm_head_loss_forward: chunks ", chunk_tokens,
             " x ", chunk_vocab, " must be positive");
  *count = 0;
  if (n == 0) return 0.0;
  ScratchBuffer<float> mx{size_t(n)}, target_logit{size_t(n)};
  ScratchBuffer<double> sum{size_t(n)}, row_loss{size_t(n)};
  ZAYA_LAUNCH(init_kernel, blocks_for(n, 128), 128, 0, 0)
  (mx.get(), sum.get(), target_logit.get(), n);
  ZAYA_CUDA_LAUNCHED("lm_head_loss_forward (init)");
  for (int t0 = 0; t0 < n; t0 += chunk_tokens) {
    const int tn = std::min(chunk_tokens, n - t0);
    for (int v0 = 0; v0 < v; v0 += chunk_vocab) {
      const int vn = std::min(chunk_vocab, v - v0);
      matmul_forward(scratch, y + size_t(t0) * e, w.at(size_t(v0) * e), nullptr, tn, e, vn);
      ZAYA_LAUNCH(online_lse_kernel, tn, kRowThreads, 0, 0)
      (mx.get(), sum.get(), target_logit.get(), scratch, targets, t0, v0, vn);
      ZAYA_CUDA_LAUNCHED("lm_head_loss_forward (block)");
    }
  }
  ZAYA_LAUNCH(finish_lse_kernel, blocks_for(n, 128), 128, 0, 0)
  (lse, row_loss.get(), mx.get(), sum.get(), target_logit.get(), targets, n);
  ZAYA_CUDA_LAUNCHED("lm_head_loss_forward (finish)");
  return sum_row_losses(row_loss.get(), targets, n, count);
}

void lm_head_loss_backward(float* dy, GradRef dw, const float* y, WeightRef w, const float* lse,
                           const int32_t* targets, int n, int e, int v, float loss_scale,
                           int chunk_tokens, int chunk_vocab, float* scratch) {
  ZAYA_CHECK(chunk_tokens > 0 && chunk_vocab > 0, "lm_head_loss_backward: chunks ", chunk_tokens,
             " x ", chunk_vocab, " must be positive");
  for (int t0 = 0; t0 < n; t0 += chunk_tokens) {
    const int tn = std::min(chunk_tokens, n - t0);
    for (int v0 = 0; v0 < v; v0 += chunk_vocab) {
      const int vn = std::min(chunk_vocab, v - v0);
      matmul_forward(scratch, y + size_t(t0) * e, w.at(size_t(v0) * e), nullptr, tn, e, vn);
      ZAYA_LAUNCH(dlogits_kernel, tn, kRowThreads, 0, 0)
      (scratch, lse, targets, t0, v0, vn, loss_scale);
      ZAYA_CUDA_LAUNCHED("lm_head_loss_backward (dlogits)");
      // dy[t0 : t0+tn] += dlogits · w[v0 : v0+vn];  dw[v0 : v0+vn] += dlogitsᵀ · y[t0 : t0+tn]
      matmul_backward(dy ? dy + size_t(t0) * e : nullptr, dw.at(size_t(v0) * e), nullptr, scratch,
                      y + size_t(t0) * e, w.at(size_t(v0) * e), tn, e, vn);
    }
  }
}

// The Backend's signatures (backend_ops.inc): the blocks as the CPU op takes them.
double lm_head_loss_forward(float* lse, const float* y, WeightRef w, const int32_t* targets, int n,
                            int e, int v, const LmHeadChunks& chunks, float* scratch,
                            int64_t* count) {
  return lm_head_loss_forward(lse, y, w, targets, n, e, v, chunks.tokens, chunks.vocab, scratch,
                              count);
}

void lm_head_loss_backward(float* dy, GradRef dw, const float* y, WeightRef w, const float* lse,
                           const int32_t* targets, int n, int e, int v, float loss_scale,
                           const LmHeadChunks& chunks, float* scratch) {
  lm_head_loss_backward(dy, dw, y, w, lse, targets, n, e, v, loss_scale, chunks.tokens,
                        chunks.vocab, scratch);
}

}  // namespace zaya::cuda
