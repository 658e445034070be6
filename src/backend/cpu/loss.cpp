#include "backend/cpu/loss.h"

#include <cstddef>
#include "backend/cpu/fast_exp.h"

#include <cmath>
#include <vector>

namespace zaya::cpu {

double cross_entropy_forward(float* lse, const float* logits, const int32_t* targets, int n,
                             int vocab, int64_t* count) {
  std::vector<double> row_loss(n, 0.0);
#pragma omp parallel for schedule(static)
  for (int r = 0; r < n; ++r) {
    const float* x = logits + size_t(r) * vocab;
    float mx = x[0];
    for (int j = 1; j < vocab; ++j) mx = x[j] > mx ? x[j] : mx;
    double sum = 0.0;
    for (int j = 0; j < vocab; ++j) sum += fast_exp(x[j] - mx);  // fp32 exp, fp64 sum
    lse[r] = float(mx + std::log(sum));
    if (targets[r] != kIgnoreIndex) row_loss[r] = double(mx) + std::log(sum) - x[targets[r]];
  }
  double total = 0.0;
  int64_t c = 0;
  for (int r = 0; r < n; ++r) {  // fixed-order sum: deterministic
    total += row_loss[r];
    c += targets[r] != kIgnoreIndex;
  }
  *count = c;
  return total;
}

void cross_entropy_backward_inplace(float* logits, const float* lse, const int32_t* targets, int n,
                                    int vocab, float loss_scale) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < n; ++r) {
    float* x = logits + size_t(r) * vocab;
    if (targets[r] == kIgnoreIndex) {
      for (int j = 0; j < vocab; ++j) x[j] = 0.0f;
      continue;
    }
    const float l = lse[r];
    for (int j = 0; j < vocab; ++j) x[j] = loss_scale * fast_exp(x[j] - l);
    x[targets[r]] -= loss_scale;
  }
}

}  // namespace zaya::cpu
