#include "backend/cpu/loss.h"

#include <cstddef>
#include "backend/cpu/fast_exp.h"

#include <algorithm>
#include <cmath>
#include <vector>

ZAYA_CPU_TARGET_BEGIN
namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

namespace {

// Rows whose float64 sums advance together, and the columns of exponentials buffered at a time.
constexpr int kRowBlock = 8;
constexpr int kChunk = 512;

// Each row's Σ_j exp(x[j] − max) in float64, added in column order: the same additions as one row
// at a time, so the same bits, but a row's sum is a chain of dependent adds (one per 4 cycles), so
// 8 rows' chains run side by side, with the exponentials vectorised into a buffer beforehand.
void exp_sums(double* sums, const float* const* rows, const float* row_max, int count, int vocab) {
  alignas(64) float e[kRowBlock][kChunk];
  double s[kRowBlock] = {};
  for (int j0 = 0; j0 < vocab; j0 += kChunk) {
    const int width = std::min(kChunk, vocab - j0);
    for (int i = 0; i < count; ++i) {
      const float* x = rows[i] + j0;
      const float mx = row_max[i];
      for (int j = 0; j < width; ++j) e[i][j] = fast_exp(x[j] - mx);
    }
    if (count == kRowBlock) {
      for (int j = 0; j < width; ++j)
        for (int i = 0; i < kRowBlock; ++i) s[i] += e[i][j];
    } else {
      for (int i = 0; i < count; ++i)
        for (int j = 0; j < width; ++j) s[i] += e[i][j];
    }
  }
  for (int i = 0; i < count; ++i) sums[i] = s[i];
}

// max_j x[j], as the scan m = x[j] > m ? x[j] : m from m = x[0] takes it (a NaN counts only in
// x[0]), in kLanes independent lanes that the compiler vectorises: the maximum is the same value
// in any order.
float row_max(const float* x, int vocab) {
  constexpr int kLanes = 16;
  float lane[kLanes];
  for (int l = 0; l < kLanes; ++l) lane[l] = x[0];
  int j = 1;
  for (; j + kLanes <= vocab; j += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] = x[j + l] > lane[l] ? x[j + l] : lane[l];
  float m = lane[0];
  for (int l = 1; l < kLanes; ++l) m = lane[l] > m ? lane[l] : m;
  for (; j < vocab; ++j) m = x[j] > m ? x[j] : m;
  return m;
}

}  // namespace

double cross_entropy_forward(float* lse, const float* logits, const int32_t* targets, int n,
                             int vocab, int64_t* count) {
  std::vector<double> row_loss(n, 0.0);
  const int blocks = (n + kRowBlock - 1) / kRowBlock;
#pragma omp parallel for schedule(static)
  for (int b = 0; b < blocks; ++b) {
    const int r0 = b * kRowBlock, rows = std::min(kRowBlock, n - r0);
    const float* x[kRowBlock];
    float mx[kRowBlock];
    double sum[kRowBlock];
    for (int i = 0; i < rows; ++i) {
      x[i] = logits + size_t(r0 + i) * vocab;
      mx[i] = row_max(x[i], vocab);
    }
    exp_sums(sum, x, mx, rows, vocab);  // fp32 exp, fp64 sum
    for (int i = 0; i < rows; ++i) {
      const int r = r0 + i;
      lse[r] = float(mx[i] + std::log(sum[i]));
      if (targets[r] != kIgnoreIndex)
        row_loss[r] = double(mx[i]) + std::log(sum[i]) - x[i][targets[r]];
    }
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

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
ZAYA_CPU_TARGET_END
