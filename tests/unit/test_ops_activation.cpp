// Gradient checks for the pointwise activations and the row softmax (backend/cpu/activation.h).
//
// Inputs span [-4, 4] (GELU/SiLU curvature is largest near 0, tails saturate). The functions are
// smooth with |f'''| = O(1), so eps = 1e-2 gives truncation error ~2e-5; a probe touches one output
// (one row for softmax/SwiGLU), so fp32 rounding adds only ~ulp/2eps ≈ 1e-5. Tolerance: default
// rtol 1e-2, atol 1e-3 · max|grad|.
#include <cmath>
#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/activation.h"
#include "gradcheck.h"

namespace zaya::cpu {
namespace {

using test::check_gradient;
using test::random_uniform;
using test::weighted_sum;

TEST(OpsActivation, GeluGradientAndForward) {
  std::mt19937 rng(41);
  for (long n : {1L, 7L, 200L}) {
    std::vector<float> x = random_uniform(size_t(n), rng, -4.0f, 4.0f);
    const std::vector<float> R = random_uniform(x.size(), rng);
    std::vector<float> out(x.size()), dx(x.size(), 0.0f);
    auto loss = [&] {
      gelu_forward(out.data(), x.data(), n);
      return weighted_sum(out, R);
    };
    loss();
    for (size_t i = 0; i < x.size(); ++i)  // x·Φ(x), exact erf form
      EXPECT_NEAR(out[i], 0.5 * x[i] * (1.0 + std::erf(x[i] / std::sqrt(2.0))), 1e-6);
    gelu_backward(dx.data(), R.data(), x.data(), n);
    EXPECT_TRUE(check_gradient("gelu", x, dx, loss));
  }
}

TEST(OpsActivation, SiluGradientAndForward) {
  std::mt19937 rng(42);
  for (long n : {1L, 5L, 200L}) {
    std::vector<float> x = random_uniform(size_t(n), rng, -4.0f, 4.0f);
    const std::vector<float> R = random_uniform(x.size(), rng);
    std::vector<float> out(x.size()), dx(x.size(), 0.0f);
    auto loss = [&] {
      silu_forward(out.data(), x.data(), n);
      return weighted_sum(out, R);
    };
    loss();
    for (size_t i = 0; i < x.size(); ++i)
      EXPECT_NEAR(out[i], x[i] / (1.0 + std::exp(-double(x[i]))), 1e-6);
    silu_backward(dx.data(), R.data(), x.data(), n);
    EXPECT_TRUE(check_gradient("silu", x, dx, loss));
  }
}

TEST(OpsActivation, SwigluGradientAndForward) {
  std::mt19937 rng(43);
  for (const auto& [n_, f_] :
       {std::pair{1, 1}, std::pair{1, 6}, std::pair{5, 7}, std::pair{8, 16}}) {
    const int n = n_, f = f_;  // lambdas below capture them
    SCOPED_TRACE("n=" + std::to_string(n) + " f=" + std::to_string(f));
    std::vector<float> x = random_uniform(size_t(n) * 2 * f, rng, -4.0f, 4.0f);
    const std::vector<float> R = random_uniform(size_t(n) * f, rng);
    std::vector<float> out(size_t(n) * f), dx(x.size(), 0.0f);
    auto loss = [&] {
      swiglu_forward(out.data(), x.data(), n, f);
      return weighted_sum(out, R);
    };
    loss();
    for (int r = 0; r < n; ++r)
      for (int j = 0; j < f; ++j) {  // gate = first half
        const double g = x[size_t(r) * 2 * f + j], u = x[size_t(r) * 2 * f + f + j];
        EXPECT_NEAR(out[size_t(r) * f + j], g / (1.0 + std::exp(-g)) * u, 1e-5);
      }
    swiglu_backward(dx.data(), R.data(), x.data(), n, f);
    EXPECT_TRUE(check_gradient("swiglu", x, dx, loss));
  }
}

TEST(OpsActivation, SoftmaxGradientAndForward) {
  std::mt19937 rng(44);
  for (const auto& [n_, c_] :
       {std::pair{1, 1}, std::pair{1, 5}, std::pair{4, 9}, std::pair{6, 32}}) {
    const int n = n_, c = c_;  // lambdas below capture them
    SCOPED_TRACE("n=" + std::to_string(n) + " c=" + std::to_string(c));
    std::vector<float> x = random_uniform(size_t(n) * c, rng, -3.0f, 3.0f);
    const std::vector<float> R = random_uniform(x.size(), rng);
    std::vector<float> out(x.size()), dx(x.size(), 0.0f);
    auto loss = [&] {
      softmax_forward(out.data(), x.data(), n, c);
      return weighted_sum(out, R);
    };
    loss();
    for (int r = 0; r < n; ++r) {
      double z = 0.0;
      for (int j = 0; j < c; ++j) z += std::exp(double(x[size_t(r) * c + j]));
      for (int j = 0; j < c; ++j)
        EXPECT_NEAR(out[size_t(r) * c + j], std::exp(double(x[size_t(r) * c + j])) / z, 1e-6);
    }
    softmax_backward(dx.data(), R.data(), out.data(), n, c);
    if (c == 1) {  // softmax of one logit is constant 1: the gradient is exactly zero
      for (float g : dx) EXPECT_NEAR(g, 0.0f, 1e-7f);
    } else {
      EXPECT_TRUE(check_gradient("softmax", x, dx, loss));
    }
  }
}

TEST(OpsActivation, SoftmaxLargeLogitsStayFinite) {
  const std::vector<float> x{1000.0f, 999.0f, -1000.0f};
  std::vector<float> out(3);
  softmax_forward(out.data(), x.data(), 1, 3);
  const double e = std::exp(-1.0);
  EXPECT_NEAR(out[0], 1.0 / (1.0 + e), 1e-6);
  EXPECT_NEAR(out[1], e / (1.0 + e), 1e-6);
  EXPECT_EQ(out[2], 0.0f);
}

}  // namespace
}  // namespace zaya::cpu
