// Muon's orthogonalisation in float64 for the tests, written from its definition rather than taken
// from src/: the expectation the fp32 Newton–Schulz of the optimizer and of the backends is held
// to.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

namespace zaya::test {

// Muon's orthogonalisation written out here in float64 with plain loops, from its definition
// (KellerJordan/Muon, as docs/ and tests/optim/compare_optim.py state it): X = G / (‖G‖_F + 1e-7)
// on the wide orientation (transposed when rows > cols), then `steps` times
// X ← a·X + (b·A + c·A²)·X with A = X·Xᵀ and the quintic's (a, b, c) = (3.4445, −4.7750, 2.0315).
inline std::vector<double> newton_schulz_fp64(const std::vector<double>& g, int64_t rows,
                                              int64_t cols, int steps) {
  constexpr double a = 3.4445, b = -4.7750, c = 2.0315;
  const bool tall = rows > cols;
  const int64_t m = std::min(rows, cols), n = std::max(rows, cols);
  double frob = 0;
  for (double v : g) frob += v * v;
  frob = std::sqrt(frob) + 1e-7;
  std::vector<double> x(size_t(m * n)), gram(size_t(m * m)), poly(size_t(m * m)), next(x.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t q = 0; q < cols; ++q)
      x[size_t(tall ? q * rows + r : r * cols + q)] = g[size_t(r * cols + q)] / frob;
  for (int s = 0; s < steps; ++s) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < m; ++j) {
        double sum = 0;
        for (int64_t k = 0; k < n; ++k) sum += x[size_t(i * n + k)] * x[size_t(j * n + k)];
        gram[size_t(i * m + j)] = sum;
      }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < m; ++j) {
        double sq = 0;
        for (int64_t k = 0; k < m; ++k) sq += gram[size_t(i * m + k)] * gram[size_t(k * m + j)];
        poly[size_t(i * m + j)] = b * gram[size_t(i * m + j)] + c * sq;
      }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t k = 0; k < m; ++k) sum += poly[size_t(i * m + k)] * x[size_t(k * n + j)];
        next[size_t(i * n + j)] = a * x[size_t(i * n + j)] + sum;
      }
    std::swap(x, next);
  }
  std::vector<double> out(g.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t q = 0; q < cols; ++q)
      out[size_t(r * cols + q)] = x[size_t(tall ? q * rows + r : r * cols + q)];
  return out;
}

}  // namespace zaya::test
