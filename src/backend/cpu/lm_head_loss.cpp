#include "backend/cpu/lm_head_loss.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/fast_exp.h"
#include "backend/cpu/loss.h"
#include "backend/cpu/matmul.h"

ZAYA_CPU_TARGET_BEGIN
namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

namespace {

// Calls fn(t0, tn, v0, vn) for every block of tn tokens × vn vocabulary entries, token chunks in
// order and the vocabulary chunks in order within each, with scratch[tn, vn] holding the block's
// logits y[t0 : t0+tn] · w[v0 : v0+vn]ᵀ.
template <class Fn>
void for_each_logits_block(const float* y, const float* w, int n, int e, int v,
                           const LmHeadChunks& chunks, float* scratch, Fn&& fn) {
  for (int t0 = 0; t0 < n; t0 += chunks.tokens) {
    const int tn = std::min(chunks.tokens, n - t0);
    for (int v0 = 0; v0 < v; v0 += chunks.vocab) {
      const int vn = std::min(chunks.vocab, v - v0);
      gemm(false, true, tn, vn, e, 1.0f, y + size_t(t0) * e, e, w + size_t(v0) * e, e, 0.0f,
           scratch, vn);
      fn(t0, tn, v0, vn);
    }
  }
}

}  // namespace

double lm_head_loss_forward(float* lse, const float* y, const float* w, const int32_t* targets,
                            int n, int e, int v, const LmHeadChunks& chunks, float* scratch,
                            int64_t* count) {
  std::vector<float> mx(static_cast<size_t>(n), -INFINITY);
  std::vector<double> sum(static_cast<size_t>(n), 0.0);
  std::vector<float> target_logit(static_cast<size_t>(n), 0.0f);
  for_each_logits_block(y, w, n, e, v, chunks, scratch, [&](int t0, int tn, int v0, int vn) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < tn; ++r) {
      const float* x = scratch + size_t(r) * vn;
      const size_t t = size_t(t0 + r);
      float m = mx[t];
      for (int j = 0; j < vn; ++j) m = x[j] > m ? x[j] : m;
      // Rescale the running sum to the new max (exp(−inf) = 0 for the first block).
      double s = sum[t] * std::exp(double(mx[t]) - double(m));
      for (int j = 0; j < vn; ++j) s += fast_exp(x[j] - m);
      mx[t] = m;
      sum[t] = s;
      const int32_t target = targets[t];
      if (target != kIgnoreIndex && target >= v0 && target < v0 + vn)
        target_logit[t] = x[target - v0];
    }
  });
  double total = 0.0;
  int64_t c = 0;
  for (int t = 0; t < n; ++t) {  // fixed-order sum: deterministic
    const double l = double(mx[size_t(t)]) + std::log(sum[size_t(t)]);
    lse[t] = float(l);
    if (targets[t] == kIgnoreIndex) continue;
    total += l - target_logit[size_t(t)];
    ++c;
  }
  *count = c;
  return total;
}

void lm_head_loss_backward(float* dy, float* dw, const float* y, const float* w, const float* lse,
                           const int32_t* targets, int n, int e, int v, float loss_scale,
                           const LmHeadChunks& chunks, float* scratch) {
  for_each_logits_block(y, w, n, e, v, chunks, scratch, [&](int t0, int tn, int v0, int vn) {
  // The block becomes dlogits = scale · (softmax − onehot); ignored rows become zero.
#pragma omp parallel for schedule(static)
    for (int r = 0; r < tn; ++r) {
      float* x = scratch + size_t(r) * vn;
      const int t = t0 + r;
      if (targets[t] == kIgnoreIndex) {
        std::fill(x, x + vn, 0.0f);
        continue;
      }
      const float l = lse[t];
      for (int j = 0; j < vn; ++j) x[j] = loss_scale * fast_exp(x[j] - l);
      if (targets[t] >= v0 && targets[t] < v0 + vn) x[targets[t] - v0] -= loss_scale;
    }
    // dy[t0 : t0+tn] += dlogits · w[v0 : v0+vn];  dw[v0 : v0+vn] += dlogitsᵀ · y[t0 : t0+tn]
    if (dy)
      gemm(false, false, tn, e, vn, 1.0f, scratch, vn, w + size_t(v0) * e, e, 1.0f,
           dy + size_t(t0) * e, e);
    if (dw)
      gemm(true, false, vn, e, tn, 1.0f, scratch, vn, y + size_t(t0) * e, e, 1.0f,
           dw + size_t(v0) * e, e);
  });
}

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
ZAYA_CPU_TARGET_END
