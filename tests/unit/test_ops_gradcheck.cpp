// Tests of the gradient checker itself (gradcheck.h): it must accept a correct gradient and report
// a mismatch when the analytic gradient is wrong, otherwise every Ops* gradient test is vacuous.
#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

#include "backend/cpu/activation.h"
#include "backend/cpu/matmul.h"
#include "gradcheck.h"

namespace zaya::cpu {
namespace {

using test::check_gradient;
using test::compare_gradients;
using test::GradCheckOptions;
using test::random_uniform;
using test::weighted_sum;

struct MatmulCase {
  int n = 6, k = 5, m = 4;
  std::vector<float> in, w, R, out, din, dw;
  explicit MatmulCase(std::mt19937& rng)
      : in(random_uniform(size_t(n) * k, rng)),
        w(random_uniform(size_t(m) * k, rng)),
        R(random_uniform(size_t(n) * m, rng)),
        out(size_t(n) * m),
        din(in.size(), 0.0f),
        dw(w.size(), 0.0f) {
    matmul_backward(din.data(), dw.data(), nullptr, R.data(), in.data(), w.data(), n, k, m);
  }
  double Loss() {
    matmul_forward(out.data(), in.data(), w.data(), nullptr, n, k, m);
    return weighted_sum(out, R);
  }
};

TEST(OpsGradcheck, AcceptsCorrectGradient) {
  std::mt19937 rng(100);
  MatmulCase c(rng);
  EXPECT_TRUE(check_gradient("din", c.in, c.din, [&] { return c.Loss(); }));
  EXPECT_TRUE(check_gradient("dw", c.w, c.dw, [&] { return c.Loss(); }));
}

TEST(OpsGradcheck, RejectsOnePerturbedElement) {
  std::mt19937 rng(101);
  MatmulCase c(rng);
  float mx = 0.0f;
  for (float g : c.din) mx = std::fmax(mx, std::fabs(g));
  ASSERT_GT(mx, 0.1f);
  std::vector<float> bad = c.din;
  bad[7] += 0.05f * mx;  // 5% of the gradient's scale on a single element
  const auto result = check_gradient("din (perturbed)", c.in, bad, [&] { return c.Loss(); });
  EXPECT_FALSE(result) << result.message();
}

TEST(OpsGradcheck, RejectsScaledGradient) {
  // A uniformly 3% too large gradient (e.g. a wrong constant in a backward) exceeds rtol = 1e-2.
  std::mt19937 rng(102);
  std::vector<float> x = random_uniform(64, rng, -3.0f, 3.0f);
  const std::vector<float> R = random_uniform(x.size(), rng);
  std::vector<float> out(x.size()), dx(x.size(), 0.0f);
  auto loss = [&] {
    gelu_forward(out.data(), x.data(), long(x.size()));
    return weighted_sum(out, R);
  };
  gelu_backward(dx.data(), R.data(), x.data(), long(x.size()));
  EXPECT_TRUE(check_gradient("gelu", x, dx, loss));
  for (float& g : dx) g *= 1.03f;
  EXPECT_FALSE(check_gradient("gelu x1.03", x, dx, loss));
}

TEST(OpsGradcheck, RejectsWrongBackward) {
  // A plausible bug: dw computed with the transposed product layout (in and w swapped roles).
  std::mt19937 rng(103);
  MatmulCase c(rng);
  std::vector<float> wrong(c.w.size(), 0.0f);
  for (int j = 0; j < c.m; ++j)
    for (int kk = 0; kk < c.k; ++kk) {
      double s = 0.0;
      for (int i = 0; i < c.n; ++i)
        s += double(c.R[size_t(i) * c.m + j]) * c.in[size_t(i) * c.k + (c.k - 1 - kk)];
      wrong[size_t(j) * c.k + kk] = float(s);
    }
  EXPECT_FALSE(check_gradient("dw (wrong)", c.w, wrong, [&] { return c.Loss(); }));
}

TEST(OpsGradcheck, RejectsNaNAndSizeMismatch) {
  const std::vector<size_t> idx{0, 1};
  EXPECT_FALSE(compare_gradients("nan", {1.0f, NAN}, {1.0, 1.0}, idx, {}));
  EXPECT_TRUE(compare_gradients("ok", {1.0f, 2.0f}, {1.0, 2.0}, idx, {}));
  std::vector<float> x(3, 0.0f);
  EXPECT_FALSE(check_gradient("size", x, std::vector<float>(2), [] { return 0.0; }));
}

TEST(OpsGradcheck, SubsetPicksDistinctSortedIndices) {
  const std::vector<size_t> all = test::pick_indices(10, 0, 1);
  EXPECT_EQ(all.size(), 10u);
  const std::vector<size_t> some = test::pick_indices(1000, 50, 7);
  ASSERT_EQ(some.size(), 50u);
  for (size_t i = 1; i < some.size(); ++i) EXPECT_LT(some[i - 1], some[i]);
  EXPECT_LT(some.back(), 1000u);
  (void)GradCheckOptions{};
}

}  // namespace
}  // namespace zaya::cpu
