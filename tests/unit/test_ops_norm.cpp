// Gradient checks for RMSNorm and CCA's per-head L2 norm (backend/cpu/norm.h).
//
// Both are smooth and non-linear; with inputs of O(1) magnitude (row norms far from 0) the third
// derivatives are O(1), so eps = 1e-2 gives a truncation error ~eps²/6 ≈ 2e-5 relative, and the
// fp32 rounding of the c (or d) outputs a probe touches, divided by 2eps, stays ~1e-5. Tolerance:
// the default rtol 1e-2 with atol 1e-3 · max|grad|.
#include <cmath>
#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/norm.h"
#include "gradcheck.h"

namespace zaya::cpu {
namespace {

using test::check_gradient;
using test::random_uniform;
using test::weighted_sum;

void CheckRmsnorm(int n, int c, std::mt19937& rng) {
  SCOPED_TRACE("n=" + std::to_string(n) + " c=" + std::to_string(c));
  const float eps = 1e-5f;
  std::vector<float> in = random_uniform(size_t(n) * c, rng);
  std::vector<float> w = random_uniform(c, rng, 0.5f, 1.5f);
  const std::vector<float> R = random_uniform(size_t(n) * c, rng);
  std::vector<float> out(size_t(n) * c), rstd(n);
  auto loss = [&] {
    rmsnorm_forward(out.data(), rstd.data(), in.data(), w.data(), n, c, eps);
    return weighted_sum(out, R);
  };
  loss();
  for (int i = 0; i < n; ++i) {  // forward against the formula
    double ss = 0.0;
    for (int j = 0; j < c; ++j) ss += double(in[size_t(i) * c + j]) * in[size_t(i) * c + j];
    const double r = 1.0 / std::sqrt(ss / c + eps);
    EXPECT_NEAR(rstd[i], r, 1e-5 * r);
    for (int j = 0; j < c; ++j)
      EXPECT_NEAR(out[size_t(i) * c + j], in[size_t(i) * c + j] * r * w[j], 1e-5 * r);
  }
  std::vector<float> din(in.size(), 0.0f), dw(w.size(), 0.0f);
  rmsnorm_backward(din.data(), dw.data(), R.data(), in.data(), w.data(), rstd.data(), n, c);
  EXPECT_TRUE(check_gradient("rmsnorm din", in, din, loss));
  EXPECT_TRUE(check_gradient("rmsnorm dw", w, dw, loss));
}

TEST(OpsNorm, RmsnormGradient) {
  std::mt19937 rng(11);
  CheckRmsnorm(1, 2, rng);  // (c = 1 is degenerate: y ≈ sign(x)·w, gradient ~eps_norm ≈ 1e-5)
  CheckRmsnorm(1, 8, rng);
  CheckRmsnorm(5, 16, rng);
  CheckRmsnorm(3, 33, rng);
}

void CheckL2norm(int n, int heads, int d, bool with_temp, std::mt19937& rng) {
  SCOPED_TRACE("n=" + std::to_string(n) + " heads=" + std::to_string(heads) +
               " d=" + std::to_string(d) + (with_temp ? " temp" : " no temp"));
  std::vector<float> in = random_uniform(size_t(n) * heads * d, rng);
  std::vector<float> temp = random_uniform(heads, rng, 0.5f, 1.5f);
  const float* tp = with_temp ? temp.data() : nullptr;
  const std::vector<float> R = random_uniform(in.size(), rng);
  std::vector<float> out(in.size()), inv(size_t(n) * heads);
  auto loss = [&] {
    l2norm_forward(out.data(), inv.data(), in.data(), with_temp ? temp.data() : nullptr, n, heads,
                   d);
    return weighted_sum(out, R);
  };
  loss();
  for (int i = 0; i < n * heads; ++i) {  // forward against the formula
    const float* x = in.data() + size_t(i) * d;
    double ss = 0.0;
    for (int j = 0; j < d; ++j) ss += double(x[j]) * x[j];
    const double s = std::sqrt(double(d)) * (with_temp ? temp[i % heads] : 1.0) / std::sqrt(ss);
    EXPECT_NEAR(inv[i], 1.0 / std::sqrt(ss), 1e-5 / std::sqrt(ss));
    for (int j = 0; j < d; ++j) EXPECT_NEAR(out[size_t(i) * d + j], x[j] * s, 1e-5 * s);
  }
  std::vector<float> din(in.size(), 0.0f), dtemp(heads, 0.0f);
  l2norm_backward(din.data(), with_temp ? dtemp.data() : nullptr, R.data(), in.data(), tp,
                  inv.data(), n, heads, d);
  EXPECT_TRUE(check_gradient("l2norm din", in, din, loss));
  if (with_temp) {
    EXPECT_TRUE(check_gradient("l2norm dtemp", temp, dtemp, loss));
  } else {
    for (float g : dtemp) EXPECT_EQ(g, 0.0f);
  }
}

TEST(OpsNorm, L2normGradientWithTemp) {
  std::mt19937 rng(12);
  CheckL2norm(1, 1, 4, true, rng);
  CheckL2norm(3, 2, 8, true, rng);
  CheckL2norm(5, 4, 6, true, rng);
}

TEST(OpsNorm, L2normGradientWithoutTemp) {
  std::mt19937 rng(13);
  CheckL2norm(1, 1, 4, false, rng);
  CheckL2norm(4, 3, 8, false, rng);
}

}  // namespace
}  // namespace zaya::cpu
