// The collective watchdog (dist/collective_watchdog.h), the watched communicator's sequence
// numbers, and the supervisor's verdict on the ranks' reports (aegis/collective_reports.h).
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "aegis/collective_reports.h"
#include "core/error.h"
#include "dist/collective_watchdog.h"

namespace zaya {
namespace {

using dist::CollectiveWait;

// Reports collected from the watchdog's thread.
struct Reports {
  std::mutex mutex;
  std::condition_variable arrived;
  std::vector<CollectiveWait> waits;
  dist::CollectiveWatchdog::Report sink() {
    return [this](const CollectiveWait& w) {
      const std::lock_guard lock(mutex);
      waits.push_back(w);
      arrived.notify_all();
    };
  }
  bool wait_for(size_t n, double seconds) {
    std::unique_lock lock(mutex);
    return arrived.wait_for(lock, std::chrono::duration<double>(seconds),
                            [&] { return waits.size() >= n; });
  }
};

TEST(CollectiveWatchdog, ReportsAWaitPastItsKindsTimeoutOnceWithWhatAndSinceWhen) {
  dist::CollectiveTimeouts t;
  t.default_s = 1000;
  dist::add_kind_timeout(t, "all_reduce=0.2", "--collective-timeout-kind");
  Reports reports;
  dist::CollectiveWatchdog dog(t, /*rank=*/3, reports.sink(), /*abort_after_s=*/1000, 0.01);
  {
    // Past the default's 1000 s never: a barrier that lasts 0.4 s is not reported.
    const auto barrier = dog.begin("world", {0, 1, 2, 3}, 7, "barrier", 0);
    const auto w = dog.begin("world/split(1)", {1, 3}, 12, "all_reduce", 4096);
    ASSERT_TRUE(reports.wait_for(1, 10));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // no second report
  }
  ASSERT_EQ(reports.waits.size(), 1u);
  const CollectiveWait& r = reports.waits[0];
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.group, "world/split(1)");
  EXPECT_EQ(r.members, (std::vector<int>{1, 3}));
  EXPECT_EQ(r.seq, 12);
  EXPECT_EQ(r.kind, "all_reduce");
  EXPECT_EQ(r.bytes, 4096);
  EXPECT_EQ(r.timeout_s, 0.2);
  EXPECT_GE(r.waited_s, 0.2);
  // The line a rank prints carries the same wait, which the supervisor parses back.
  const auto parsed = dist::parse_collective_timeout_line(dist::collective_timeout_line(r));
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->group, r.group);
  EXPECT_EQ(parsed->seq, r.seq);
  EXPECT_EQ(parsed->since, r.since);
  EXPECT_EQ(parsed->members, r.members);
}

TEST(CollectiveWatchdog, AWaitThatEndsInTimeIsNotReported) {
  dist::CollectiveTimeouts t;
  t.default_s = 0.3;
  Reports reports;
  dist::CollectiveWatchdog dog(t, 0, reports.sink(), 1000, 0.01);
  { const auto w = dog.begin("world", {0, 1}, 1, "barrier", 0); }
  EXPECT_FALSE(reports.wait_for(1, 0.6));
}

TEST(CollectiveWatchdog, BadKindTimeoutsAreClearErrors) {
  dist::CollectiveTimeouts t;
  EXPECT_THROW(dist::add_kind_timeout(t, "allreduce=3", "--collective-timeout-kind"), Error);
  EXPECT_THROW(dist::add_kind_timeout(t, "all_reduce", "--collective-timeout-kind"), Error);
  EXPECT_THROW(dist::add_kind_timeout(t, "all_reduce=-1", "--collective-timeout-kind"), Error);
  EXPECT_THROW(dist::add_kind_timeout(t, "all_reduce=3x", "--collective-timeout-kind"), Error);
  std::string message;
  try {
    dist::add_kind_timeout(t, "allreduce=3", "--collective-timeout-kind");
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("--collective-timeout-kind"), std::string::npos) << message;
  EXPECT_NE(message.find("reduce_scatter"), std::string::npos) << message;  // the kinds
  EXPECT_FALSE(dist::parse_collective_timeout_line("step 5/20 | loss 3.1").has_value());
  EXPECT_THROW(dist::parse_collective_timeout_line("zaya: collective timeout: rank 1 {\"rank\":1}"),
               Error);
}

CollectiveWait wait_of(int rank, int64_t seq, double since, std::vector<int> peers = {}) {
  CollectiveWait w;
  w.rank = rank;
  w.group = "world";
  w.members = {0, 1, 2, 3};
  w.seq = seq;
  w.kind = peers.empty() ? "all_reduce" : "sendrecv";
  w.since = since;
  w.peers = std::move(peers);
  return w;
}

TEST(CollectiveVerdict, NamesTheMembersThatDidNotReportTheSameCall) {
  // Ranks 0 and 3 wait in all_reduce #40; rank 1 waits in #39's successor elsewhere (#41: it
  // entered a different call), rank 2 reports nothing (stopped).
  const auto v = aegis::judge_collective_timeouts(
      {wait_of(3, 40, 100.2), wait_of(0, 40, 100.0), wait_of(1, 41, 100.5)});
  EXPECT_EQ(v.first.rank, 0);
  EXPECT_EQ(v.waiting, (std::vector<int>{0, 3}));
  EXPECT_EQ(v.missing, (std::vector<int>{1, 2}));
  EXPECT_EQ(aegis::describe_verdict(v).rfind("ranks 1, 2 never entered world all_reduce #40", 0),
            0u);
}

TEST(CollectiveVerdict, APointToPointWaitNamesItsSilentPeer) {
  const auto v = aegis::judge_collective_timeouts({wait_of(1, 9, 5.0, {2, 0})});
  EXPECT_EQ(v.waiting, (std::vector<int>{1}));
  EXPECT_EQ(v.missing, (std::vector<int>{0, 2}));
  // Every member reporting the same call: nobody is missing (a deadlock inside the library).
  const auto all = aegis::judge_collective_timeouts(
      {wait_of(0, 4, 1), wait_of(1, 4, 1), wait_of(2, 4, 1), wait_of(3, 4, 1)});
  EXPECT_TRUE(all.missing.empty());
}

}  // namespace
}  // namespace zaya
