// The step accounting's own arithmetic (train/step_accounting.h): the routers' health from route
// counts, and the parts of a step's time. train.smoke holds a real run's records to it.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

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
  EXPECT_EQ(j.size(), 10u);
}

}  // namespace
}  // namespace zaya
