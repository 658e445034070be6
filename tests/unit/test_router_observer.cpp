// ZayaModel's router-logits observer (set_router_logits_observer), which the step accounting reads
// the routers' per-token health from: one call per MoE stage per forward with that stage's
// logits, none for the forwards a backward recomputes. Zero final router weights give zero logits
// (an even spread); doubling a stage's doubles its logits exactly (a power of two commutes with
// the rounding); and the entropy from the observed logits agrees with the one from route_probs (the
// backend's own softmax).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model/zaya_model.h"
#include "test_util.h"
#include "train/step_accounting.h"

namespace zaya {
namespace {

struct Observed {
  std::vector<std::vector<float>> logits;  // per call
  std::vector<int> stages;
};

Observed observe_forward(ZayaModel& m, const std::vector<int32_t>& tokens, int B, int S) {
  Observed o;
  m.set_router_logits_observer([&](int k, std::span<const float> l, int routes) {
    EXPECT_EQ(routes, int(m.config().num_routes()));
    o.stages.push_back(k);
    o.logits.emplace_back(l.begin(), l.end());
  });
  m.forward(tokens, ZayaModel::shifted_targets(tokens, B, S), B, S);
  m.set_router_logits_observer({});
  return o;
}

TEST(RouterObserver, EveryMoeStageOnceWithItsLogits) {
  const ModelConfig c = test::tiny_config();
  ZayaModel m(c);
  test::randomise_weights(m.params(), 3, 1);
  const int B = 2, S = 6, n_moe = int(c.num_moe_stages()), routes = int(c.num_routes());
  std::vector<int32_t> tokens(size_t(B) * S);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 7 + 1) % c.vocab_size);
  const Observed o = observe_forward(m, tokens, B, S);
  ASSERT_EQ(int(o.stages.size()), n_moe);
  for (int k = 0; k < n_moe; ++k) {
    EXPECT_EQ(o.stages[size_t(k)], k);
    ASSERT_EQ(o.logits[size_t(k)].size(), size_t(B) * S * routes);
    // The observed logits' softmax entropy against route_probs' (the backend's softmax).
    RouterTokenStats s;
    s.observe(o.logits[size_t(k)], routes);
    const std::span<const float> p = m.route_probs(2 * k + 1);
    double h = 0;
    for (const float x : p)
      if (x > 0) h -= double(x) * std::log(double(x));
    EXPECT_NEAR(s.mean_entropy(), h / double(B * S), 1e-5) << "MoE stage " << k;
  }
  // Doubling the first MoE stage's final router weights doubles its logits, bit for bit (the
  // later stages see its changed output, so theirs change otherwise).
  const std::string first = "model.layers.1.zaya_block.router.router_mlp.4.weight";
  float* w = m.params().weight_ptr(first);
  for (int64_t i = 0; i < m.params().registry().get(first).numel; ++i) w[i] *= 2.0f;
  const Observed twice = observe_forward(m, tokens, B, S);
  for (size_t i = 0; i < o.logits[0].size(); ++i)
    ASSERT_EQ(twice.logits[0][i], 2.0f * o.logits[0][i]) << i;
  // Zero weights: every logit 0, an even spread.
  for (int k = 0; k < n_moe; ++k) {
    const std::string name =
        "model.layers." + std::to_string(2 * k + 1) + ".zaya_block.router.router_mlp.4.weight";
    std::fill_n(m.params().weight_ptr(name), m.params().registry().get(name).numel, 0.0f);
  }
  const Observed zero = observe_forward(m, tokens, B, S);
  RouterTokenStats s;
  s.observe(zero.logits[0], routes);
  EXPECT_EQ(s.max_logit, 0.0);
  EXPECT_NEAR(s.mean_entropy(), std::log(double(routes)), 1e-12);
}

TEST(RouterObserver, TheForwardsABackwardRecomputesAreNotObserved) {
  const ModelConfig c = test::tiny_config();
  for (const Recompute mode : {Recompute::kSelective, Recompute::kFull}) {
    ZayaModel m(c);
    test::randomise_weights(m.params(), 4, 2);
    m.set_recompute(mode);
    const int B = 1, S = 5;
    std::vector<int32_t> tokens(size_t(B) * S, 3);
    int calls = 0;
    m.set_router_logits_observer([&](int, std::span<const float>, int) { ++calls; });
    m.forward(tokens, ZayaModel::shifted_targets(tokens, B, S), B, S);
    EXPECT_EQ(calls, int(c.num_moe_stages())) << recompute_name(mode);
    m.backward();
    EXPECT_EQ(calls, int(c.num_moe_stages()))
        << "the backward's recomputed forwards, " << recompute_name(mode);
  }
}

}  // namespace
}  // namespace zaya
