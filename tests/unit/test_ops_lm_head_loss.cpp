// The chunked LM head + cross-entropy against the materialised one (LM head product, then the
// vocabulary-wide loss): loss, lse and both gradients within 1e-6 relative for blocks of every
// shape (one token, one vocabulary entry, ragged, one block, wider than the vocabulary), ignored
// targets included; and its gradients against finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/lm_head_loss.h"
#include "backend/cpu/loss.h"
#include "backend/cpu/matmul.h"
#include "gradcheck.h"

namespace zaya::cpu {
namespace {

using test::random_uniform;

double max_relative(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return diff / scale;
}

struct Problem {
  int n, e, v;
  std::vector<float> y, w;
  std::vector<int32_t> targets;
  Problem(int n_, int e_, int v_, uint32_t seed) : n(n_), e(e_), v(v_) {
    std::mt19937 rng(seed);
    y = random_uniform(size_t(n) * e, rng, -1.0f, 1.0f);
    w = random_uniform(size_t(v) * e, rng, -0.5f, 0.5f);
    std::uniform_int_distribution<int> tok(0, v - 1);
    targets.resize(size_t(n));
    for (int t = 0; t < n; ++t) targets[size_t(t)] = t % 5 == 3 ? kIgnoreIndex : tok(rng);
  }
};

struct Result {
  double loss;
  int64_t count;
  std::vector<float> lse, dy, dw;
};

Result materialised(const Problem& p, float scale) {
  Result r{0, 0, std::vector<float>(size_t(p.n)), std::vector<float>(size_t(p.n) * p.e, 0.0f),
           std::vector<float>(size_t(p.v) * p.e, 0.0f)};
  std::vector<float> logits(size_t(p.n) * p.v);
  matmul_forward(logits.data(), p.y.data(), p.w.data(), nullptr, p.n, p.e, p.v);
  r.loss = cross_entropy_forward(r.lse.data(), logits.data(), p.targets.data(), p.n, p.v, &r.count);
  cross_entropy_backward_inplace(logits.data(), r.lse.data(), p.targets.data(), p.n, p.v, scale);
  matmul_backward(r.dy.data(), r.dw.data(), nullptr, logits.data(), p.y.data(), p.w.data(), p.n,
                  p.e, p.v);
  return r;
}

Result chunked(const Problem& p, float scale, LmHeadChunks ch) {
  Result r{0, 0, std::vector<float>(size_t(p.n)), std::vector<float>(size_t(p.n) * p.e, 0.0f),
           std::vector<float>(size_t(p.v) * p.e, 0.0f)};
  std::vector<float> scratch(ch.scratch_floats(p.n, p.v));
  r.loss = lm_head_loss_forward(r.lse.data(), p.y.data(), p.w.data(), p.targets.data(), p.n, p.e,
                                p.v, ch, scratch.data(), &r.count);
  lm_head_loss_backward(r.dy.data(), r.dw.data(), p.y.data(), p.w.data(), r.lse.data(),
                        p.targets.data(), p.n, p.e, p.v, scale, ch, scratch.data());
  return r;
}

TEST(OpsLmHeadLoss, ChunkedEqualsMaterialised) {
  const Problem p(37, 24, 97, 5);
  const float scale = 0.031f;
  const Result want = materialised(p, scale);
  for (const auto& [t, v] :
       {std::pair{1, 50}, {40, 1}, {8, 16}, {5, 200}, {37, 97}, {64, 13}, {3, 96}}) {
    SCOPED_TRACE("chunks " + std::to_string(t) + " x " + std::to_string(v));
    const Result got = chunked(p, scale, LmHeadChunks{t, v});
    EXPECT_EQ(got.count, want.count);
    EXPECT_LE(std::abs(got.loss - want.loss) / std::abs(want.loss), 1e-6);
    EXPECT_LE(max_relative(got.lse, want.lse), 1e-6);
    EXPECT_LE(max_relative(got.dy, want.dy), 1e-6);
    EXPECT_LE(max_relative(got.dw, want.dw), 1e-6);
  }
}

TEST(OpsLmHeadLoss, GradientsMatchFiniteDifferences) {
  Problem p(6, 5, 11, 7);
  const LmHeadChunks ch{4, 3};
  const float scale = 0.5f;
  std::vector<float> scratch(ch.scratch_floats(p.n, p.v)), lse(size_t(p.n));
  int64_t count = 0;
  auto loss = [&] {
    return scale * lm_head_loss_forward(lse.data(), p.y.data(), p.w.data(), p.targets.data(), p.n,
                                        p.e, p.v, ch, scratch.data(), &count);
  };
  loss();
  std::vector<float> dy(p.y.size(), 0.0f), dw(p.w.size(), 0.0f);
  lm_head_loss_backward(dy.data(), dw.data(), p.y.data(), p.w.data(), lse.data(), p.targets.data(),
                        p.n, p.e, p.v, scale, ch, scratch.data());
  EXPECT_TRUE(test::check_gradient("lm_head_loss dy", p.y, dy, loss));
  EXPECT_TRUE(test::check_gradient("lm_head_loss dw", p.w, dw, loss));
}

}  // namespace
}  // namespace zaya::cpu
