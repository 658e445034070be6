// Trainer-side pieces of Aegis: ZAYA_FAULTS parsing and once-per-run firing, skip windows,
// heartbeat records.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "test_util.h"
#include "train/fault_injection.h"
#include "train/heartbeat.h"
#include "train/skip_windows.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;

TEST(FaultSpecs, ParsesTheDocumentedForms) {
  const auto f =
      parse_fault_specs("kill@7:rank=1, hang@6:rank=0,nan@9,slow:rank=1:factor=3,ckpt_die@10");
  ASSERT_EQ(f.size(), 5u);
  EXPECT_EQ(f[0].kind, FaultKind::Kill);
  EXPECT_EQ(f[0].step, 7);
  EXPECT_EQ(f[0].rank, 1);
  EXPECT_EQ(f[1].kind, FaultKind::Hang);
  EXPECT_EQ(f[1].rank, 0);
  EXPECT_EQ(f[2].kind, FaultKind::Nan);
  EXPECT_EQ(f[2].rank, -1);  // every rank
  EXPECT_EQ(f[3].kind, FaultKind::Slow);
  EXPECT_EQ(f[3].step, 1);
  EXPECT_EQ(f[3].factor, 3);
  EXPECT_EQ(f[4].kind, FaultKind::CkptDie);
  EXPECT_EQ(f[4].text, "ckpt_die@10");
  EXPECT_TRUE(parse_fault_specs("").empty());
}

TEST(FaultSpecs, ErrorsNameTheBadItem) {
  auto error = [](const char* text) { return test::error_of([&] { parse_fault_specs(text); }); };
  EXPECT_NE(error("kill@7,explode@3").find("item 'explode@3': unknown fault 'explode'"),
            std::string::npos);
  EXPECT_NE(error("kill").find("item 'kill': 'kill' needs a step"), std::string::npos);
  EXPECT_NE(error("kill@x").find("step 'x' is not a non-negative integer"), std::string::npos);
  EXPECT_NE(error("kill@0").find("steps count from 1"), std::string::npos);
  EXPECT_NE(error("nan@3:rank=-1").find("rank '-1'"), std::string::npos);
  EXPECT_NE(error("nan@3:factor=2").find("unknown option 'factor'"), std::string::npos);
  EXPECT_NE(error("hang@2:rank").find("option 'rank' is not KEY=VALUE"), std::string::npos);
  EXPECT_NE(error("slow:factor=1").find("slow needs factor=F with F > 1"), std::string::npos);
  EXPECT_NE(error("nan@3,,kill@4").find("empty item"), std::string::npos);
}

TEST(FaultInjector, NanFiresOncePerRunDirectoryOnTheChosenRank) {
  const fs::path out = test::temp_dir("faults_nan");
  FaultInjector rank0(parse_fault_specs("nan@4:rank=0"), out.string(), 0);
  FaultInjector rank1(parse_fault_specs("nan@4:rank=0"), out.string(), 1);
  EXPECT_FALSE(rank0.loss_fault(3));
  EXPECT_FALSE(rank1.loss_fault(4));
  EXPECT_TRUE(rank0.loss_fault(4));
  EXPECT_TRUE(fs::exists(out / "faults" / "nan@4:rank=0.rank-00000"));
  // A restarted job (a new injector over the same run directory) gets past it.
  FaultInjector again(parse_fault_specs("nan@4:rank=0"), out.string(), 0);
  EXPECT_FALSE(again.loss_fault(4));
  fs::remove_all(out);
}

TEST(FaultInjector, NoFaultsIsANoOp) {
  FaultInjector none;
  EXPECT_FALSE(none.active());
  none.at_step_start(1);
  none.in_checkpoint_write(1);
  EXPECT_FALSE(none.loss_fault(1));
}

TEST(FaultInjector, SlowStretchesStepsByTheFactor) {
  const fs::path out = test::temp_dir("faults_slow");
  FaultInjector slow(parse_fault_specs("slow:factor=3"), out.string(), 0);
  using clock = std::chrono::steady_clock;
  auto busy = [](double s) {  // a step's own work
    const auto end = clock::now() + std::chrono::duration<double>(s);
    while (clock::now() < end) {
    }
  };
  slow.at_step_start(1);
  busy(0.02);
  const auto t0 = clock::now();
  slow.at_step_start(2);  // sleeps 2 x the 20 ms of step 1
  const double slept = std::chrono::duration<double>(clock::now() - t0).count();
  EXPECT_GT(slept, 0.038);
  EXPECT_LT(slept, 0.2);
  fs::remove_all(out);
}

TEST(SkipWindows, MapsIndicesPastWindowsIncludingChains) {
  const SkipWindows w({{10, 20, "a"}, {20, 25, "b"}, {40, 41, "c"}, {5, 8, "d"}});
  EXPECT_EQ(w.next_unskipped(0), 0);
  EXPECT_EQ(w.next_unskipped(4), 4);
  EXPECT_EQ(w.next_unskipped(5), 8);
  EXPECT_EQ(w.next_unskipped(9), 9);
  EXPECT_EQ(w.next_unskipped(10), 25);  // [10,20) then the adjacent [20,25)
  EXPECT_EQ(w.next_unskipped(24), 25);
  EXPECT_EQ(w.next_unskipped(40), 41);
  EXPECT_EQ(SkipWindows({{0, 30, "x"}, {10, 20, "y"}}).next_unskipped(12), 30);
  EXPECT_EQ(SkipWindows().next_unskipped(7), 7);
}

TEST(SkipWindows, FileRoundTripAndErrors) {
  const fs::path out = test::temp_dir("skip_windows");
  EXPECT_TRUE(SkipWindows::load(out.string()).windows().empty());  // missing file: none
  add_skip_window(out.string(), {64, 72, "nan at step 9"});
  add_skip_window(out.string(), {8, 16, "spike at step 2"});
  const SkipWindows w = SkipWindows::load(out.string());
  ASSERT_EQ(w.windows().size(), 2u);
  EXPECT_EQ(w.windows()[0].begin, 8);  // sorted
  EXPECT_EQ(w.windows()[1].reason, "nan at step 9");
  EXPECT_EQ(w.next_unskipped(64), 72);
  std::ofstream(out / "skip_windows.json") << R"([{"begin": 9, "end": 9}])";
  EXPECT_NE(test::error_of([&] {
              SkipWindows::load(out.string());
            }).find("skip_windows.json: entry 0 has begin 9 and end 9"),
            std::string::npos);
  std::ofstream(out / "skip_windows.json") << R"([{"begin": 1}])";
  EXPECT_NE(test::error_of([&] {
              SkipWindows::load(out.string());
            }).find("entry 0 needs integer 'begin' and 'end'"),
            std::string::npos);
  fs::remove_all(out);
}

TEST(Heartbeat, WriterFillsIdentityAndTheReaderGetsNanBack) {
  const fs::path out = test::temp_dir("heartbeat");
  HeartbeatWriter writer(out.string(), 3);
  writer.beat_step(7, std::nan(""), 1.5, 0.25, 448, 512);
  std::ifstream in(heartbeat_history_path(out.string(), 3));
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  const Heartbeat hb = heartbeat_from_json(nlohmann::json::parse(line), "test");
  EXPECT_EQ(hb.rank, 3);
  EXPECT_EQ(hb.step, 7);
  EXPECT_TRUE(std::isnan(hb.loss));
  EXPECT_EQ(hb.grad_norm, 1.5);
  EXPECT_EQ(hb.sample_begin, 448);
  EXPECT_EQ(hb.sample_end, 512);
  EXPECT_EQ(hb.phase, BeatPhase::kStep);
  EXPECT_EQ(hb.pid, int64_t(::getpid()));
  EXPECT_FALSE(hb.host.empty());
  EXPECT_GT(hb.time, 1.6e9);
  EXPECT_TRUE(fs::exists(out / "heartbeat" / "rank-00003.json"));
  fs::remove_all(out);
}

}  // namespace
}  // namespace zaya
