// ZAYA1's bias-balancing controller: skewed routers converge to an even load.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <random>
#include <vector>

#include "core/error.h"
#include "model/config.h"
#include "optim/router_balancer.h"

namespace zaya {
namespace {

// Routes of `tokens` tokens with fixed router probabilities p (softmax of N(0,1) logits, so some
// routes are preferred by p itself): argmax(p + b), ties to the lowest index, as moe.cpp routes.
struct SimulatedRouter {
  int64_t routes;
  std::vector<float> probs;  // [tokens, routes]

  SimulatedRouter(int64_t routes_, int64_t tokens, uint32_t seed) : routes(routes_) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    probs.resize(size_t(tokens * routes));
    for (int64_t t = 0; t < tokens; ++t) {
      float* p = probs.data() + t * routes;
      float sum = 0;
      for (int64_t e = 0; e < routes; ++e) sum += p[e] = std::exp(normal(rng) + 0.3f * float(e));
      for (int64_t e = 0; e < routes; ++e) p[e] /= sum;
    }
  }
  RouteCounts count(const float* bias) const {
    RouteCounts counts(size_t(routes), 0);
    for (size_t t = 0; t < probs.size() / size_t(routes); ++t) {
      const float* p = probs.data() + t * size_t(routes);
      int64_t best = 0;
      for (int64_t e = 1; e < routes; ++e)
        if (p[e] + bias[e] > p[best] + bias[best]) best = e;
      ++counts[size_t(best)];
    }
    return counts;
  }
};

// From biases skewed by up to 0.8 (skip route at −1, so it starts idle), 1500 controller steps at
// lr 1e-3 bring every route's share within ±5% of 1/routes. (Reached on the tiny config: max/min
// ≤ 1.01; the band leaves room because near balance the biases oscillate by ~lr.)
TEST(RouterBalancer, SkewedRoutersConvergeToEvenLoad) {
  const ModelConfig mc = load_model_config(ZAYA_SOURCE_DIR "/configs/tiny.json");
  ParamStore store(mc);
  store.init(1);
  OptimConfig config;
  config.router_bias_lr = 1e-3;
  RouterBalancer balancer(store.registry(), config);
  const int stages = balancer.num_moe_stages();
  const int64_t routes = balancer.num_routes();
  ASSERT_GE(stages, 1);
  ASSERT_EQ(routes, mc.num_routes());

  std::vector<SimulatedRouter> routers;
  std::vector<float*> biases;
  for (int k = 0; k < stages; ++k) {
    routers.emplace_back(routes, 4096, uint32_t(100 + k));
    float* b = store.weight_ptr(balancer.bias_name(k));
    for (int64_t e = 0; e + 1 < routes; ++e) b[e] = 0.4f * float((e + k) % 3);
    b[routes - 1] = -1.0f;
    biases.push_back(b);
  }
  const double even = 1.0 / double(routes);
  const ExpertLoad start = expert_load(routers[0].count(biases[0]));
  EXPECT_TRUE(start.skip_fraction < 0.5 * even || start.max_min_ratio > 2)
      << "the start should be skewed";

  for (int step = 0; step < 1500; ++step) {
    std::vector<RouteCounts> counts;
    for (int k = 0; k < stages; ++k) counts.push_back(routers[size_t(k)].count(biases[size_t(k)]));
    balancer.update(store, counts);
  }
  for (int k = 0; k < stages; ++k) {
    const ExpertLoad load = expert_load(routers[size_t(k)].count(biases[size_t(k)]));
    for (int64_t e = 0; e < routes; ++e) {
      EXPECT_GT(load.fractions[size_t(e)], 0.95 * even) << "stage " << k << " route " << e;
      EXPECT_LT(load.fractions[size_t(e)], 1.05 * even) << "stage " << k << " route " << e;
    }
    std::cout << "stage " << k << ": start max/min " << start.max_min_ratio << ", end max/min "
              << load.max_min_ratio << ", skip " << load.skip_fraction << "\n";
  }
  EXPECT_EQ(balancer.step_count(), 1500);
}

TEST(RouterBalancer, ExpertLoadStatistics) {
  const ExpertLoad load = expert_load({30, 10, 20, 40});  // 3 experts + skip
  EXPECT_DOUBLE_EQ(load.fractions[0], 0.3);
  EXPECT_DOUBLE_EQ(load.skip_fraction, 0.4);
  EXPECT_DOUBLE_EQ(load.max_min_ratio, 3.0);  // experts only
  EXPECT_TRUE(std::isinf(expert_load({5, 0, 1}).max_min_ratio));
  EXPECT_THROW(expert_load({0, 0}), Error);

  RouteCounts counts(3, 0);
  const std::vector<int32_t> routes = {0, 2, 2, 1};
  accumulate_routes(counts, routes);
  EXPECT_EQ(counts, (RouteCounts{1, 1, 2}));
  const std::vector<int32_t> bad = {3};
  EXPECT_THROW(accumulate_routes(counts, bad), Error);
}

TEST(RouterBalancer, RejectsMismatchedCounts) {
  const ModelConfig mc = load_model_config(ZAYA_SOURCE_DIR "/configs/tiny.json");
  ParamStore store(mc);
  RouterBalancer balancer(store.registry(), OptimConfig{});
  EXPECT_THROW(balancer.update(store, {}), Error);
  std::vector<RouteCounts> counts(size_t(balancer.num_moe_stages()),
                                  RouteCounts(size_t(balancer.num_routes()), 0));
  EXPECT_THROW(balancer.update(store, counts), Error);  // no tokens
}

}  // namespace
}  // namespace zaya
