// Cross-entropy (backend/cpu/loss.h): forward against a direct double computation, including
// ignored rows (target −100), and backward against central differences of the forward's value.
//
// The loss is scalar, so L = loss_scale · Σ losses plays the role of Σ out ⊙ R. The forward sums in
// double (only the max and the logits are fp32), so the central difference is accurate; the
// curvature is bounded (softmax), so eps = 1e-2 gives truncation ≈ 2e-5. Tolerance: default rtol
// 1e-2, atol 1e-3 · max|grad|.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/loss.h"
#include "gradcheck.h"

namespace zaya::cpu {
namespace {

using test::check_gradient;
using test::random_uniform;

std::vector<int32_t> RandomTargets(int n, int vocab, double ignore_fraction, std::mt19937& rng) {
  std::uniform_int_distribution<int> tok(0, vocab - 1);
  std::bernoulli_distribution ignore(ignore_fraction);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = ignore(rng) ? kIgnoreIndex : tok(rng);
  return t;
}

TEST(OpsLoss, CrossEntropyForwardMatchesDirect) {
  std::mt19937 rng(51);
  for (const auto& [n_, vocab_] :
       {std::pair{1, 1}, std::pair{1, 7}, std::pair{6, 11}, std::pair{16, 50},
        // blocks of 8 rows and a partial one, columns in buffers of 512 and a partial one
        std::pair{19, 1300}}) {
    const int n = n_, vocab = vocab_;  // lambdas below capture them
    SCOPED_TRACE("n=" + std::to_string(n) + " vocab=" + std::to_string(vocab));
    const std::vector<float> logits = random_uniform(size_t(n) * vocab, rng, -5.0f, 5.0f);
    std::vector<int32_t> targets = RandomTargets(n, vocab, 0.3, rng);
    if (n > 2) {  // make sure both kinds of row are present
      targets[0] = kIgnoreIndex;
      targets[1] = vocab - 1;
    }
    std::vector<float> lse(n);
    int64_t count = -1;
    const double loss =
        cross_entropy_forward(lse.data(), logits.data(), targets.data(), n, vocab, &count);
    double expect = 0.0;
    int64_t expect_count = 0;
    for (int r = 0; r < n; ++r) {
      double z = 0.0;
      for (int j = 0; j < vocab; ++j) z += std::exp(double(logits[size_t(r) * vocab + j]));
      const double l = std::log(z);
      EXPECT_NEAR(lse[r], l, 1e-5 * (1.0 + std::abs(l)));
      if (targets[r] == kIgnoreIndex) continue;
      expect += l - logits[size_t(r) * vocab + targets[r]];
      ++expect_count;
    }
    EXPECT_EQ(count, expect_count);
    // The op takes exp in fp32 (one rounding of ~6e-8 relative per term) and sums in fp64, so the
    // loss carries fp32 precision: a few 1e-8 relative per row, 1e-6 bounds it with a margin while
    // any wrong term (a missed max shift, a wrong target) is off by far more.
    EXPECT_NEAR(loss, expect, 1e-6 * (1.0 + std::abs(expect)));
  }
}

TEST(OpsLoss, CrossEntropyAllIgnored) {
  const std::vector<float> logits{0.5f, -1.0f, 2.0f, 0.0f, 1.0f, 3.0f};
  const std::vector<int32_t> targets{kIgnoreIndex, kIgnoreIndex};
  std::vector<float> lse(2);
  int64_t count = -1;
  EXPECT_EQ(cross_entropy_forward(lse.data(), logits.data(), targets.data(), 2, 3, &count), 0.0);
  EXPECT_EQ(count, 0);
  std::vector<float> g = logits;
  cross_entropy_backward_inplace(g.data(), lse.data(), targets.data(), 2, 3, 1.0f);
  for (float x : g) EXPECT_EQ(x, 0.0f);
}

TEST(OpsLoss, CrossEntropyBackwardMatchesFiniteDifferences) {
  std::mt19937 rng(52);
  for (const auto& [n_, vocab_] :
       {std::pair{1, 2}, std::pair{1, 9}, std::pair{7, 13}, std::pair{12, 40}}) {
    const int n = n_, vocab = vocab_;  // lambdas below capture them
    SCOPED_TRACE("n=" + std::to_string(n) + " vocab=" + std::to_string(vocab));
    std::vector<float> logits = random_uniform(size_t(n) * vocab, rng, -4.0f, 4.0f);
    std::vector<int32_t> targets = RandomTargets(n, vocab, 0.25, rng);
    if (n > 2) targets[n - 1] = kIgnoreIndex;
    const float loss_scale = 0.37f;  // stands in for 1 / count
    std::vector<float> lse(n);
    int64_t count = 0;
    auto loss = [&] {
      return loss_scale *
             cross_entropy_forward(lse.data(), logits.data(), targets.data(), n, vocab, &count);
    };
    loss();
    std::vector<float> grad = logits;
    cross_entropy_backward_inplace(grad.data(), lse.data(), targets.data(), n, vocab, loss_scale);
    EXPECT_TRUE(check_gradient("cross_entropy dlogits", logits, grad, loss));
    for (int r = 0; r < n; ++r) {
      double row_sum = 0.0;  // softmax − onehot sums to 0 over the row (and ignored rows are 0)
      for (int j = 0; j < vocab; ++j) row_sum += grad[size_t(r) * vocab + j];
      EXPECT_NEAR(row_sum, 0.0, 1e-6);
      if (targets[r] == kIgnoreIndex) {
        for (int j = 0; j < vocab; ++j) EXPECT_EQ(grad[size_t(r) * vocab + j], 0.0f);
      }
    }
  }
}

}  // namespace
}  // namespace zaya::cpu
