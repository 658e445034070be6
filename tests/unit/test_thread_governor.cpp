// The trainer's thread governor (train/thread_governor.h): the policy on measured inputs, and the
// kernel measurement it relies on.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "train/thread_governor.h"

namespace zaya {
namespace {

// wait_s for `threads` threads that each waited `share` of an interval of 1 s.
double waited(int threads, double share) {
  return threads * share;
}

TEST(ThreadPolicy, DropsThreadsInProportionToTheWaitForACore) {
  ThreadPolicy p(2, 2);
  ThreadDecision d = p.after_interval(1, 1.0, waited(2, 0.02));
  EXPECT_EQ(d.threads, 2);
  EXPECT_TRUE(d.message.empty());
  d = p.after_interval(2, 1.0, waited(2, 0.5));  // two busy processes beside two threads on 2 cores
  EXPECT_EQ(d.threads, 1);
  EXPECT_NE(d.message.find("waited 50%"), std::string::npos) << d.message;

  ThreadPolicy wide(16, 16);  // 8 busy processes beside 16 threads on 16 cores: each waits 1/3
  EXPECT_EQ(wide.after_interval(1, 2.0, 16 * 2.0 / 3).threads, 11);
  ThreadPolicy barely(4, 4);  // just over the limit (4 · 0.89 rounds to 4): still one fewer
  EXPECT_EQ(barely.after_interval(1, 1.0, waited(4, 0.11)).threads, 3);
  ThreadPolicy one(1, 1);  // never below one
  EXPECT_EQ(one.after_interval(1, 1.0, waited(1, 0.9)).threads, 1);
}

TEST(ThreadPolicy, TriesOneMoreThreadAfterTheBackoffAndBacksOffFurtherWhenItFails) {
  ThreadPolicy p(2, 2);
  EXPECT_EQ(p.after_interval(1, 1.0, waited(2, 0.4)).threads, 1);
  // Quiet at one thread (one competing process leaves a core free): no try before the back-off.
  int64_t i = 2;
  for (; i < 1 + ThreadPolicy::kFirstBackoff; ++i)
    EXPECT_EQ(p.after_interval(i, 1.0, waited(1, 0.0)).threads, 1) << "interval " << i;
  ThreadDecision d = p.after_interval(i, 1.0, waited(1, 0.0));
  EXPECT_EQ(d.threads, 2) << "interval " << i;
  EXPECT_NE(d.message.find("trying one more"), std::string::npos) << d.message;
  // The second thread brings the wait back: return to one, next try twice as late.
  d = p.after_interval(++i, 1.0, waited(2, 0.3));
  EXPECT_EQ(d.threads, 1);
  EXPECT_EQ(p.backoff(), 2 * ThreadPolicy::kFirstBackoff);
  const int64_t failed = i;
  for (++i; i < failed + 2 * ThreadPolicy::kFirstBackoff; ++i)
    EXPECT_EQ(p.after_interval(i, 1.0, 0.0).threads, 1) << "interval " << i;
  EXPECT_EQ(p.after_interval(i, 1.0, 0.0).threads, 2);
  // This time the machine is free: keep the thread, and the back-off starts over.
  EXPECT_EQ(p.after_interval(++i, 1.0, waited(2, 0.01)).threads, 2);
  EXPECT_EQ(p.backoff(), ThreadPolicy::kFirstBackoff);
  // Never above the maximum.
  for (int k = 0; k < 100; ++k) EXPECT_EQ(p.after_interval(++i, 1.0, 0.0).threads, 2);
}

TEST(ThreadPolicy, NoTryWhileTheOneThreadItselfWaits) {
  // Two busy processes beside one thread on 2 cores: it waits a third of the time; a second thread
  // would only make the threads wait for each other.
  ThreadPolicy p(2, 1);
  for (int64_t i = 1; i < 100; ++i) EXPECT_EQ(p.after_interval(i, 1.0, 0.33).threads, 1);
}

TEST(ThreadPolicy, BackoffIsBounded) {
  ThreadPolicy p(2, 1);
  int64_t i = 1;
  for (int tries = 0; tries < 20; ++tries) {
    while (p.after_interval(i++, 1.0, 0.0).threads == 1) {
    }
    EXPECT_EQ(p.after_interval(i++, 1.0, waited(2, 0.5)).threads, 1);
  }
  EXPECT_EQ(p.backoff(), ThreadPolicy::kMaxBackoff);
}

// Two busy threads pinned to one CPU must each wait for it about half of the time, and the kernel's
// per-thread run-queue delay must show it: this is the measurement the governor acts on.
TEST(ThreadGovernor, RunQueueWaitShowsTwoThreadsSharingOneCpu) {
  const std::optional<int64_t> before = process_run_queue_wait_ns();
  if (!before) GTEST_SKIP() << "this kernel does not report /proc/self/task/*/schedstat";
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &allowed)) ++cpu;
  std::atomic<bool> stop{false};
  auto spin = [&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
    while (!stop.load(std::memory_order_relaxed)) {
    }
  };
  const auto t0 = std::chrono::steady_clock::now();
  std::thread a(spin), b(spin);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  // Read while both still run: a thread's counters go with it when it exits.
  const int64_t after = process_run_queue_wait_ns().value_or(0);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stop = true;
  a.join();
  b.join();
  const double waited_s = double(after - *before) * 1e-9;
  // Together they had `wall` seconds of one CPU for 2 × wall seconds of wanting it.
  EXPECT_GT(waited_s, 0.5 * wall) << "waited " << waited_s << " s of " << wall << " s";
}

}  // namespace
}  // namespace zaya
