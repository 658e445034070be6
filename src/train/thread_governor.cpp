#include "train/thread_governor.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

namespace zaya {

std::optional<int64_t> process_run_queue_wait_ns() {
  // Each line of /proc/<pid>/task/<tid>/schedstat is "time on cpu, time waiting on a run queue,
  // timeslices run", the first two in nanoseconds (Documentation/scheduler/sched-stats.rst).
  std::error_code ec;
  std::filesystem::directory_iterator tasks("/proc/self/task", ec);
  if (ec) return std::nullopt;
  int64_t total = 0;
  bool any = false;
  for (const auto& task : tasks) {
    std::ifstream in(task.path() / "schedstat");
    int64_t on_cpu = 0, waiting = 0;
    if (in >> on_cpu >> waiting) {  // a thread may exit between the listing and the read
      total += waiting;
      any = true;
    }
  }
  if (!any) return std::nullopt;
  return total;
}

ThreadPolicy::ThreadPolicy(int max_threads, int threads)
    : max_threads_(std::max(1, max_threads)), threads_(std::clamp(threads, 1, max_threads_)) {}

ThreadDecision ThreadPolicy::after_interval(int64_t interval, double wall_s, double wait_s) {
  const double share = wall_s > 0 ? std::max(0.0, wait_s) / (wall_s * threads_) : 0.0;
  char why[200] = "";
  const int before = threads_;
  if (probing_) {
    probing_ = false;
    if (share > kContended) {
      // The extra thread brought the contention back: return to the count that had a core each
      // and wait twice as long before the next try.
      --threads_;
      backoff_ = std::min(2 * backoff_, kMaxBackoff);
      next_probe_ = interval + backoff_;
      std::snprintf(why, sizeof(why), "at %d they waited %.0f%% of the time for a core", before,
                    100 * share);
    } else {
      backoff_ = kFirstBackoff;
    }
  } else if (share > kContended && threads_ > 1) {
    // With a share s of their time spent waiting, the threads had about (1 - s) · threads cores:
    // keep that many, and at least one fewer.
    const int fit = int(std::lround(threads_ * (1.0 - share)));
    threads_ = std::clamp(fit, 1, threads_ - 1);
    next_probe_ = interval + backoff_;
    std::snprintf(why, sizeof(why),
                  "other work holds the CPU: the threads waited %.0f%% of the time for a core",
                  100 * share);
  } else if (share < kQuiet && threads_ < max_threads_ && interval >= next_probe_) {
    ++threads_;
    probing_ = true;
    std::snprintf(why, sizeof(why), "the CPU has room again: trying one more");
  }
  ThreadDecision d;
  d.threads = threads_;
  if (threads_ != before) d.message = why;
  return d;
}

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

ThreadGovernor::ThreadGovernor(bool enabled, int max_threads)
    : active_(enabled && max_threads > 1 && process_run_queue_wait_ns().has_value()),
      policy_(max_threads, max_threads) {
  if (!active_) return;
  wait0_ns_ = process_run_queue_wait_ns().value_or(0);
  t0_s_ = now_s();
}

std::string ThreadGovernor::tick(int64_t step) {
  if (!active_) return {};
  const double t1 = now_s();
  const int64_t wait1 = process_run_queue_wait_ns().value_or(wait0_ns_);
  const int before = policy_.threads();
  const ThreadDecision d =
      policy_.after_interval(++ticks_, t1 - t0_s_, double(wait1 - wait0_ns_) * 1e-9);
  wait0_ns_ = wait1;
  t0_s_ = t1;
  if (d.threads == before) return {};
  omp_set_num_threads(d.threads);
  char line[320];
  std::snprintf(line, sizeof(line), "threads: %d -> %d in step %lld (%s)", before, d.threads,
                (long long)step, d.message.c_str());
  return line;
}

}  // namespace zaya
