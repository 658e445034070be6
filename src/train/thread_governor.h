#pragma once
// Keeps training fast when other work takes cores away from it (issue 11 §3).
//
// OpenMP threads meet at a barrier after every parallel loop, hundreds of times a step. When
// another process holds a core, one of the run's threads waits in the run queue for a scheduler
// slice (milliseconds) while its siblings wait at the barrier for it; at 2 threads and 2 busy
// processes on 2 cores this made training 30-60 times slower instead of 2 times. The governor
// measures how long the run's threads waited for a core during each step (the kernel's per-thread
// run-queue delay, /proc/self/task/*/schedstat) and drops threads while that share is high, then
// tries one more thread again after a growing number of quiet steps.
//
// Changing the thread count never changes the numbers: every CPU kernel splits its work by the
// shape of the problem, not by the number of threads (see backend/cpu/matmul.cpp), so a run stays
// bitwise deterministic whatever the governor does.

#include <cstdint>
#include <optional>
#include <string>

namespace zaya {

// Nanoseconds that this process's threads have spent runnable but waiting for a CPU, summed over
// its threads; nullopt where the kernel does not report it.
std::optional<int64_t> process_run_queue_wait_ns();

struct ThreadDecision {
  int threads = 0;      // the thread count from now on
  std::string message;  // why it changed; empty when it did not
};

// The policy alone, fed with measurements (testable without a loaded machine). It sees a series
// of intervals (the trainer's micro-batches), numbered from 1.
class ThreadPolicy {
 public:
  // Above this share of the threads' time spent waiting for a core, drop threads.
  static constexpr double kContended = 0.10;
  // Below this share, the machine has room: after the back-off, try one more thread.
  static constexpr double kQuiet = 0.03;
  static constexpr int64_t kFirstBackoff = 8;
  static constexpr int64_t kMaxBackoff = 1024;

  ThreadPolicy(int max_threads, int threads);
  // Interval `interval` ran at threads() threads for wall_s seconds, and the threads waited
  // wait_s seconds in total for a core.
  ThreadDecision after_interval(int64_t interval, double wall_s, double wait_s);
  int threads() const { return threads_; }
  int64_t backoff() const { return backoff_; }

 private:
  int max_threads_;
  int threads_;
  int64_t backoff_ = kFirstBackoff;
  int64_t next_probe_ = 0;  // the first interval at which one more thread may be tried
  bool probing_ = false;    // the last interval ran with one thread more than the one before
};

// Applies ThreadPolicy to the process's OpenMP thread count, one decision per tick.
class ThreadGovernor {
 public:
  // enabled = false, or a kernel without schedstat: the thread count stays as it is.
  ThreadGovernor(bool enabled, int max_threads);
  bool active() const { return active_; }
  // Ends an interval (the trainer ticks after every micro-batch) and starts the next. Returns a
  // line to log when the thread count changed.
  std::string tick(int64_t step);

 private:
  bool active_;
  ThreadPolicy policy_;
  int64_t ticks_ = 0;
  int64_t wait0_ns_ = 0;
  double t0_s_ = 0;
};

}  // namespace zaya
