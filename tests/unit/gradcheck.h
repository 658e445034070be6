// Finite-difference gradient checking for the CPU ops (tests only).
//
// Method. For an op out = f(x, ...) we take the scalar loss L = Σ out ⊙ R with a fixed random R
// (deterministic std::mt19937), accumulated in double. The analytic gradient is the op's backward
// with dout = R, written into zero-initialised buffers. The numeric gradient is the central
// difference (L(x + eps) − L(x − eps)) / 2eps, one element at a time, with x restored bitwise after
// each probe.
//
// Comparison. Per element, |a − n| ≤ atol + rtol·|n| with atol = atol_scale · max_i |n_i|: the
// relative term handles large entries, the absolute term (scaled to the gradient's magnitude so the
// test is independent of the shape/scale of the op) covers entries that are near zero, where the
// fp32 rounding of the forward pass divided by 2eps dominates the central difference. atol never
// drops below atol_min = 1e-6, so that a gradient that is exactly zero in exact arithmetic (e.g.
// attention's dq at sequence length 1) accepts the ~1e-8 rounding residue of a fp32 backward.
// Defaults: rtol = 1e-2, atol_scale = 1e-3 (tests state their own choice next to the call).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace zaya::test {

inline std::vector<float> random_uniform(size_t n, std::mt19937& rng, float lo = -1.0f,
                                         float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Σ out ⊙ r, in double.
inline double weighted_sum(const float* out, const float* r, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; ++i) s += double(out[i]) * double(r[i]);
  return s;
}
inline double weighted_sum(const std::vector<float>& out, const std::vector<float>& r) {
  EXPECT_EQ(out.size(), r.size());
  return weighted_sum(out.data(), r.data(), std::min(out.size(), r.size()));
}

struct Tolerance {
  double rtol = 1e-2;
  double atol_scale = 1e-3;  // atol = max(atol_scale · max |numeric|, atol_min)
  double atol_min = 1e-6;
};

struct GradCheckOptions {
  float eps = 1e-2f;
  Tolerance tol;
  size_t max_checks = 0;  // 0: probe every element; otherwise a deterministic random subset
  uint32_t seed = 12345;  // for the subset
};

// For ops linear in the checked argument (matmul, conv, rope, residual merge): the central
// difference is exact up to fp32 rounding, so a large step and tight tolerances.
inline GradCheckOptions LinearOptions() {
  GradCheckOptions opt;
  opt.eps = 0.1f;
  opt.tol.rtol = 1e-3;
  opt.tol.atol_scale = 1e-4;
  return opt;
}

// All indices of [0, n), or max_checks of them drawn without replacement (sorted).
inline std::vector<size_t> pick_indices(size_t n, size_t max_checks, uint32_t seed) {
  std::vector<size_t> idx(n);
  std::iota(idx.begin(), idx.end(), size_t{0});
  if (max_checks == 0 || max_checks >= n) return idx;
  std::mt19937 rng(seed);
  std::shuffle(idx.begin(), idx.end(), rng);
  idx.resize(max_checks);
  std::sort(idx.begin(), idx.end());
  return idx;
}

// Central differences of loss() with respect to x[idx[i]]; x is restored exactly after each probe.
inline std::vector<double> numeric_gradient(std::vector<float>& x,
                                            const std::function<double()>& loss, float eps,
                                            const std::vector<size_t>& idx) {
  std::vector<double> g(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) {
    const float saved = x[idx[i]];
    x[idx[i]] = saved + eps;
    const double xp = double(x[idx[i]]);  // the step actually taken, after fp32 rounding
    const double lp = loss();
    x[idx[i]] = saved - eps;
    const double xm = double(x[idx[i]]);
    const double lm = loss();
    x[idx[i]] = saved;
    g[i] = (lp - lm) / (xp - xm);
  }
  return g;
}

// Compares analytic[idx[i]] with numeric[i] under the combined tolerance described above.
inline ::testing::AssertionResult compare_gradients(const std::string& name,
                                                    const std::vector<float>& analytic,
                                                    const std::vector<double>& numeric,
                                                    const std::vector<size_t>& idx,
                                                    const Tolerance& tol) {
  if (numeric.size() != idx.size())
    return ::testing::AssertionFailure() << name << ": numeric/index size mismatch";
  double scale = 0.0;
  for (double n : numeric) scale = std::max(scale, std::abs(n));
  const double atol = std::max(tol.atol_scale * scale, tol.atol_min);
  size_t bad = 0, worst = 0;
  double worst_ratio = -1.0;
  for (size_t i = 0; i < idx.size(); ++i) {
    if (idx[i] >= analytic.size())
      return ::testing::AssertionFailure() << name << ": index " << idx[i] << " out of range";
    const double a = analytic[idx[i]], n = numeric[i];
    const double limit = atol + tol.rtol * std::abs(n);
    const double err = std::abs(a - n);
    const double ratio = limit > 0.0 ? err / limit : (err > 0.0 ? INFINITY : 0.0);
    if (!(err <= limit)) ++bad;  // NaN counts as a failure
    if (!(ratio <= worst_ratio)) {
      worst_ratio = ratio;
      worst = i;
    }
  }
  std::ostringstream msg;
  msg << name << ": " << bad << "/" << idx.size() << " elements out of tolerance (rtol " << tol.rtol
      << ", atol " << atol << " = max(" << tol.atol_scale << " * max|n| " << scale << ", "
      << tol.atol_min << "))";
  if (!idx.empty())
    msg << "; worst at [" << idx[worst] << "]: analytic " << analytic[idx[worst]] << ", numeric "
        << numeric[worst] << ", err/limit " << worst_ratio;
  if (bad != 0) return ::testing::AssertionFailure() << msg.str();
  return ::testing::AssertionSuccess() << msg.str();
}

// Numeric gradient of loss() with respect to x, compared with `analytic` (same size as x).
inline ::testing::AssertionResult check_gradient(const std::string& name, std::vector<float>& x,
                                                 const std::vector<float>& analytic,
                                                 const std::function<double()>& loss,
                                                 const GradCheckOptions& opt = {}) {
  if (analytic.size() != x.size())
    return ::testing::AssertionFailure()
           << name << ": analytic size " << analytic.size() << " != input size " << x.size();
  const std::vector<size_t> idx = pick_indices(x.size(), opt.max_checks, opt.seed);
  const std::vector<double> numeric = numeric_gradient(x, loss, opt.eps, idx);
  return compare_gradients(name, analytic, numeric, idx, opt.tol);
}

}  // namespace zaya::test
