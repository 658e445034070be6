// Aegis detectors: hang-timeout derivation, loss NaN/spike z-scores, stragglers, log rules.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "aegis/hang_watch.h"
#include "aegis/log_rules.h"
#include "aegis/loss_guard.h"
#include "aegis/recovery.h"
#include "aegis/straggler_watch.h"
#include "test_util.h"

namespace zaya::aegis {
namespace {

// A heartbeat record as a rank's writer would send it.
Heartbeat beat(int rank, int64_t step, double time, const char* phase = "step",
               double step_time = 0.1) {
  return heartbeat_from_json({{"rank", rank},
                              {"step", step},
                              {"loss", 3.0},
                              {"grad_norm", 1.0},
                              {"step_time_s", step_time},
                              {"sample_begin", 0},
                              {"sample_end", 0},
                              {"phase", phase},
                              {"host", "host" + std::to_string(rank)},
                              {"pid", 1},
                              {"time", time}},
                             "test beat");
}

// A heartbeat's phase is read once into its mode; a phase no writer sends is an error naming
// the field, never a silent "not a step".
TEST(Heartbeat, PhasesAreReadIntoTheirModes) {
  EXPECT_EQ(beat(0, 0, 0, "checkpoint").phase, BeatPhase::kCheckpoint);
  EXPECT_EQ(heartbeat_from_json(heartbeat_to_json(beat(0, 3, 1, "done")), "round trip").phase,
            BeatPhase::kDone);
  const std::string e = test::error_of([] { beat(0, 0, 0, "Step"); });
  EXPECT_NE(e.find("test beat: field 'phase' must be start, step, checkpoint or done, got 'Step'"),
            std::string::npos)
      << e;
}

TEST(HangTimeout, IsTheFloorOrFactorTimesTheLongestRecentInterval) {
  EXPECT_EQ(derive_hang_timeout({}, 5, 30), 30);
  EXPECT_EQ(derive_hang_timeout({1, 2, 3}, 5, 10), 15);  // 5 x 3 s beats the 10 s floor
  EXPECT_EQ(derive_hang_timeout({1, 1.5}, 5, 10), 10);   // 7.5 s is under the floor
}

TEST(HangWatch, StartupTimeoutUntilTheFirstStepThenDerived) {
  HangWatch w(/*factor=*/4, /*floor=*/2, /*startup=*/60);
  w.start_attempt(1000);
  EXPECT_FALSE(w.check(1059));
  const auto startup = w.check(1061);
  ASSERT_TRUE(startup);
  EXPECT_TRUE(startup->startup);

  w.start_attempt(2000);
  w.observe(beat(0, 0, 2000, "start"), 2000);
  for (int s = 1; s <= 5; ++s) w.observe(beat(0, s, 2000 + s), 2000 + s);  // 1 s per step
  EXPECT_DOUBLE_EQ(w.timeout_s(), 4.0);
  EXPECT_FALSE(w.check(2005 + 3.9));
  const auto stall = w.check(2005 + 4.5);
  ASSERT_TRUE(stall);
  EXPECT_FALSE(stall->startup);
  EXPECT_EQ(stall->rank, 0);
  EXPECT_EQ(stall->step, 5);
  EXPECT_NEAR(stall->stalled_s, 4.5, 1e-9);
}

// After the first step and before any step interval is known, the startup timeout still holds:
// a slow second step is not a hang (the floor alone flagged one under load).
TEST(HangWatch, TheFirstStepLeavesTheStartupTimeoutUntilAnIntervalIsKnown) {
  HangWatch w(/*factor=*/100, /*floor=*/1, /*startup=*/60);
  w.start_attempt(0);
  w.observe(beat(0, 1, 1), 1);
  EXPECT_DOUBLE_EQ(w.timeout_s(), 60.0);
  EXPECT_FALSE(w.check(1 + 1.5));  // a second step taking 1.5 s
  w.observe(beat(0, 2, 2.5), 2.5);
  EXPECT_DOUBLE_EQ(w.timeout_s(), 150.0);  // 100 x the 1.5 s interval
}

TEST(HangWatch, ASlowerPhaseIsProgressAndAFinishedRankIsNotWatched) {
  HangWatch w(2, 1, 60);
  w.start_attempt(0);
  w.observe(beat(0, 1, 1), 1);
  w.observe(beat(0, 2, 2), 2);
  w.observe(beat(0, 2, 2.5, "checkpoint"), 2.5);  // a new phase counts as progress
  EXPECT_FALSE(w.check(4.4));
  EXPECT_TRUE(w.check(4.6));
  w.observe(beat(0, 2, 4.6, "done"), 4.6);
  EXPECT_FALSE(w.check(100));
}

TEST(HangWatch, OneStalledRankAmongProgressingOnes) {
  HangWatch w(2, 1, 60);
  w.start_attempt(0);
  for (int s = 1; s <= 3; ++s) {
    w.observe(beat(0, s, s), s);
    w.observe(beat(1, s, s), s);
  }
  for (int s = 4; s <= 6; ++s) w.observe(beat(0, s, s), s);  // rank 1 stuck at step 3
  const auto stall = w.check(6.5);
  ASSERT_TRUE(stall);
  EXPECT_EQ(stall->rank, 1);
  EXPECT_EQ(stall->step, 3);
}

TEST(LossGuard, ZScoreAgainstTheWindow) {
  const LossVerdict v = judge_loss({1, 2, 3, 4, 5}, 9, 3);  // mean 3, population std sqrt(2)
  EXPECT_DOUBLE_EQ(v.mean, 3);
  EXPECT_NEAR(v.stddev, std::sqrt(2.0), 1e-12);
  EXPECT_NEAR(v.z, 6 / std::sqrt(2.0), 1e-12);
  EXPECT_EQ(v.kind, LossVerdict::Kind::Spike);
  EXPECT_EQ(judge_loss({1, 2, 3, 4, 5}, 7, 3).kind, LossVerdict::Kind::Ok);    // z 2.83
  EXPECT_EQ(judge_loss({1, 2, 3, 4, 5}, -20, 3).kind, LossVerdict::Kind::Ok);  // drops are fine
}

TEST(LossGuard, FlatCurveNoiseIsNotASpike) {
  // std 0 would make any wobble infinite z; the spread is floored at 0.5 % of the mean.
  EXPECT_EQ(judge_loss({3, 3, 3, 3}, 3.03, 6).kind, LossVerdict::Kind::Ok);    // z 2
  EXPECT_EQ(judge_loss({3, 3, 3, 3}, 3.2, 6).kind, LossVerdict::Kind::Spike);  // z 13
}

TEST(LossGuard, NanAndInfAlwaysAndSpikesOnlyWithAFullWindow) {
  LossGuard g(3, 4);
  EXPECT_EQ(g.observe(1, std::numeric_limits<double>::quiet_NaN()).kind,
            LossVerdict::Kind::NonFinite);
  EXPECT_EQ(g.observe(1, 5.0).kind, LossVerdict::Kind::Ok);
  EXPECT_EQ(g.observe(2, 50.0).kind, LossVerdict::Kind::Ok);  // window not full yet
  g.observe(2, 4.9);  // replaces step 2 (a restart redid it)
  g.observe(3, 4.8);
  g.observe(4, 4.7);
  EXPECT_EQ(g.observe(5, std::numeric_limits<double>::infinity()).kind,
            LossVerdict::Kind::NonFinite);
  EXPECT_EQ(g.observe(5, 9.0).kind, LossVerdict::Kind::Spike);
  EXPECT_EQ(g.observe(5, 4.6).kind, LossVerdict::Kind::Ok);  // the spike never joined the window
}

TEST(StragglerWatch, APersistentlySlowRankIsReportedOnce) {
  StragglerWatch w(/*factor=*/1.5, /*persist=*/3);
  for (int r = 0; r < 3; ++r) w.observe(beat(r, 0, 0, "start"));
  std::vector<StragglerReport> all;
  for (int s = 1; s <= 6; ++s)
    for (int r = 0; r < 3; ++r) {
      const double t = r == 2 ? 0.35 : 0.1 + 0.01 * r;  // rank 2: 3.4x the others' median
      for (const auto& rep : w.observe(beat(r, s, s, "step", t))) all.push_back(rep);
    }
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].rank, 2);
  EXPECT_EQ(all[0].host, "host2");
  EXPECT_EQ(all[0].step, 3);  // the third slow step in a row
  EXPECT_NEAR(all[0].others_median_s, 0.105, 1e-12);
}

TEST(StragglerWatch, OccasionalSlowStepsAndTwoRanks) {
  StragglerWatch w(1.5, 3);
  w.observe(beat(0, 0, 0, "start"));
  w.observe(beat(1, 0, 0, "start"));
  int reports = 0;
  for (int s = 1; s <= 12; ++s) {  // rank 1 slow on two steps out of three: never 3 in a row
    reports += int(w.observe(beat(0, s, s, "step", 0.1)).size());
    reports += int(w.observe(beat(1, s, s, "step", s % 3 ? 0.3 : 0.1)).size());
  }
  EXPECT_EQ(reports, 0);
  // Two ranks: the slow one is compared with the other, not with a median it drags up.
  for (int s = 13; s <= 15; ++s) {
    reports += int(w.observe(beat(0, s, s, "step", 0.1)).size());
    reports += int(w.observe(beat(1, s, s, "step", 0.2)).size());
  }
  EXPECT_EQ(reports, 1);
}

TEST(LogRules, FirstMatchingRuleWinsAndCapturesTheHost) {
  const auto rules = parse_log_rules(nlohmann::json::parse(R"js([
      {"regex": "ECC error on (\\S+)", "action": "mark_bad_host"},
      {"regex": "NCCL (WARN|ERROR).*[Tt]imeout", "action": "restart"},
      {"regex": "out of memory", "action": "stop"}])js"),
                                     "rules.json");
  ASSERT_EQ(rules.size(), 3u);
  EXPECT_FALSE(match_log_rules(rules, "step 5/20 | loss 4.1"));
  const auto host = match_log_rules(rules, "uncorrectable ECC error on node17 (GPU 3)");
  ASSERT_TRUE(host);
  EXPECT_EQ(host->action, RuleAction::MarkHostBad);
  EXPECT_EQ(host->host, "node17");
  const auto nccl = match_log_rules(rules, "[rank 1] NCCL WARN Watchdog Timeout after 600 s");
  ASSERT_TRUE(nccl);
  EXPECT_EQ(nccl->index, 1u);
  EXPECT_EQ(nccl->action, RuleAction::Restart);
  EXPECT_EQ(match_log_rules(rules, "CUDA out of memory")->action, RuleAction::Stop);
}

TEST(LogRules, ErrorsNameTheRule) {
  using nlohmann::json;
  EXPECT_NE(test::error_of([] {
              parse_log_rules(json::parse(R"js([{"regex": "a", "action": "reboot"}])js"), "r.json");
            }).find("r.json: rule 0 has action 'reboot'"),
            std::string::npos);
  EXPECT_NE(test::error_of([] {
              parse_log_rules(json::parse(R"js([{"regex": "ok", "action": "stop"},
                                              {"regex": "(unclosed", "action": "stop"}])js"),
                              "r.json");
            }).find("rule 1 regex '(unclosed' does not compile"),
            std::string::npos);
  EXPECT_NE(test::error_of([] { parse_log_rules(json::object(), "r.json"); }).find("JSON list"),
            std::string::npos);
  // Issue 31: a misspelt key was ignored, and an empty regex matched every line.
  EXPECT_NE(test::error_of([] {
              parse_log_rules(json::parse(R"js([{"regex": "x", "action": "stop", "acton": 1}])js"),
                              "r.json");
            }).find("r.json: rule 0 has unknown key 'acton'"),
            std::string::npos);
  EXPECT_NE(test::error_of([] {
              parse_log_rules(json::parse(R"js([{"regex": "", "action": "stop"}])js"), "r.json");
            }).find("r.json: rule 0 has an empty 'regex'"),
            std::string::npos);
}

TEST(Recovery, ResumeAutoIsAppendedOrReplacesAFixedCheckpoint) {
  using V = std::vector<std::string>;
  EXPECT_EQ(with_resume_auto(V{"zaya", "train", "--out", "o"}),
            (V{"zaya", "train", "--out", "o", "--resume", "auto"}));
  EXPECT_EQ(with_resume_auto(V{"zaya", "train", "--resume", "o/ckpt/step-5", "--out", "o"}),
            (V{"zaya", "train", "--resume", "auto", "--out", "o"}));
  EXPECT_EQ(with_resume_auto(V{"zaya", "--resume=x"}), (V{"zaya", "--resume=auto"}));
  EXPECT_EQ(backoff_delay(2, 1, 300), 2);
  EXPECT_EQ(backoff_delay(2, 3, 300), 8);
  EXPECT_EQ(backoff_delay(2, 20, 300), 300);
}

TEST(Recovery, RestartsCanChangeTheRankCount) {
  using V = std::vector<std::string>;
  EXPECT_EQ(with_rank_count(V{"mpirun", "--oversubscribe", "-np", "64", "zaya", "train"}, 48),
            (V{"mpirun", "--oversubscribe", "-np", "48", "zaya", "train"}));
  EXPECT_EQ(with_rank_count(V{"srun", "-n", "8", "zaya"}, 6), (V{"srun", "-n", "6", "zaya"}));
  EXPECT_EQ(with_rank_count(V{"srun", "--ntasks=8", "zaya"}, 4), (V{"srun", "--ntasks=4", "zaya"}));
  // Only the launcher's count: a later "-n" of the trainer is not touched.
  EXPECT_EQ(with_rank_count(V{"mpirun", "-np", "4", "x", "-n", "9"}, 2),
            (V{"mpirun", "-np", "2", "x", "-n", "9"}));
  EXPECT_NE(test::error_of([] {
              with_rank_count(V{"zaya", "train"}, 2);
            }).find("no rank count"),
            std::string::npos);
}

TEST(Recovery, QuarantineMovesCheckpointsFromTheBadStepOn) {
  namespace fs = std::filesystem;
  const fs::path run = test::temp_dir("aegis_quarantine");
  for (const char* d : {"step-00000005", "step-00000010", "step-00000015.tmp", "step-00000009"})
    fs::create_directories(run / "ckpt" / d);
  fs::create_directories(run / "ckpt-quarantine" / "step-00000010");  // an earlier rollback's
  const auto moved = quarantine_checkpoints_from(run.string(), 9);
  EXPECT_EQ(moved.size(), 3u);
  EXPECT_TRUE(fs::exists(run / "ckpt" / "step-00000005"));
  EXPECT_FALSE(fs::exists(run / "ckpt" / "step-00000009"));
  EXPECT_TRUE(fs::exists(run / "ckpt-quarantine" / "step-00000009"));
  EXPECT_TRUE(fs::exists(run / "ckpt-quarantine" / "step-00000010.1"));  // never overwritten
  EXPECT_TRUE(fs::exists(run / "ckpt-quarantine" / "step-00000015.tmp"));
  fs::remove_all(run);
}

}  // namespace
}  // namespace zaya::aegis
