// The step accounting's own arithmetic (train/step_accounting.h): the routers' health from route
// counts, and the parts of a step's time. train.smoke holds a real run's records to it.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "train/step_accounting.h"

namespace zaya {
namespace {

using nlohmann::json;

// Two MoE stages of three routes (two experts and the skip route).
TEST(RouterWatch, EntropyBusiestShareAndIdleRoutesOverTheWindow) {
  RouterWatch watch(2);
  watch.observe({{10, 10, 10}, {30, 0, 0}});
  json j = watch.to_json();
  EXPECT_NEAR(j["entropy"][0].get<double>(), std::log(3.0), 1e-12);  // an even spread
  EXPECT_EQ(j["entropy"][1].get<double>(), 0.0);                     // all on one route
  EXPECT_NEAR(j["entropy_even"].get<double>(), std::log(3.0), 1e-12);
  EXPECT_NEAR(j["busiest_share"]["min"].get<double>(), 1.0 / 3, 1e-12);
  EXPECT_EQ(j["busiest_share"]["max"].get<double>(), 1.0);
  EXPECT_EQ(j["idle_routes"], json::parse("[[1, 1], [1, 2]]"));
  // Route 1 of stage 1 takes a token: no longer idle; route 2 stays idle.
  watch.observe({{10, 10, 10}, {29, 1, 0}});
  EXPECT_EQ(watch.to_json()["idle_routes"], json::parse("[[1, 2]]"));
  // Two more steps without it: the window (2 steps) no longer holds its token.
  watch.observe({{10, 10, 10}, {30, 0, 0}});
  EXPECT_EQ(watch.to_json()["idle_routes"], json::parse("[[1, 2]]"));
  watch.observe({{10, 10, 10}, {30, 0, 0}});
  j = watch.to_json();
  EXPECT_EQ(j["idle_routes"], json::parse("[[1, 1], [1, 2]]"));
  EXPECT_EQ(j["idle_window_steps"], 2);
}

// The per-token figures from logits, against values worked out by hand: equal logits are an even
// spread (log 3), one logit far above the others a certain choice, and a shift of every logit of
// a row changes neither entropy (softmax is shift-invariant) but moves the largest logit.
TEST(RouterTokenStats, EntropyAndLargestLogitFromTheLogits) {
  RouterTokenStats s;
  const std::vector<float> even = {0.5f, 0.5f, 0.5f, 100.0f, 0.0f, 0.0f};
  s.observe(even, 3);
  EXPECT_EQ(s.tokens, 2);
  EXPECT_NEAR(s.mean_entropy(), std::log(3.0) / 2, 1e-12);  // log 3 and ~0
  EXPECT_EQ(s.max_logit, 100.0);
  // Two routes at logits 0 and log 3: p = 1/4, 3/4, entropy −(¼ log ¼ + ¾ log ¾).
  RouterTokenStats two;
  const std::vector<float> row = {0.0f, float(std::log(3.0)), 7.0f, 7.0f + float(std::log(3.0))};
  two.observe(row, 2);
  const double h = -(0.25 * std::log(0.25) + 0.75 * std::log(0.75));
  EXPECT_NEAR(two.mean_entropy(), h, 1e-7);
  EXPECT_NEAR(two.max_logit, 7.0 + std::log(3.0), 1e-6);
}

TEST(PartClock, MarksAddTheTimeSinceTheLastMarkToEachPart) {
  PartClock clock;
  StepTimes t;
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  clock.mark(t.forward_s);
  clock.mark(t.backward_s);      // from the forward's mark on, not from the start
  EXPECT_GE(t.forward_s, 0.02);  // sleep_for sleeps at least that long
  EXPECT_GE(t.backward_s, 0.0);
  clock.mark(t.forward_s);  // a second mark adds to the part
  EXPECT_GE(t.forward_s, 0.02);
  const json j = t.to_json();
  EXPECT_EQ(j["forward"].get<double>(), t.forward_s);
  EXPECT_EQ(j.size(), 12u);  // the ten parts, wall and other
}

TEST(StepTimes, OtherIsTheWallTimeNoPartHolds) {
  StepTimes t;
  t.data_s = 0.5;
  t.forward_s = 1;
  t.backward_s = 2;
  t.reduce_wait_s = 0.25;
  t.sums_s = 0.125;
  t.optimizer_s = 1;
  t.router_s = 0.0625;
  t.eval_s = 3;
  t.tasks_s = 4;
  t.checkpoint_s = 5;
  t.wall_s = 20;
  EXPECT_EQ(t.parts_s(), 16.9375);  // exact in binary
  const json j = t.to_json();
  EXPECT_EQ(j["wall"].get<double>(), 20);
  EXPECT_EQ(j["other"].get<double>(), 20 - 16.9375);
}

}  // namespace
}  // namespace zaya
