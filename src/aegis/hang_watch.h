// Hang detection. A rank hangs when its heartbeats stop making progress (a new step or phase) for
// longer than the timeout. Until the attempt's first step the timeout is the start-up timeout
// (loading data, resuming a checkpoint); after it, the timeout follows the run's own pace:
//   timeout = max(floor, factor * the longest of the recent step-to-step heartbeat intervals)
// The intervals include evaluations and checkpoint snapshots; the floor covers the rarer slow
// phases (a first evaluation, the final synchronous checkpoint save) that recent steps don't show.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "train/heartbeat.h"

namespace zaya::aegis {

double derive_hang_timeout(const std::deque<double>& recent_intervals_s, double factor,
                           double floor_s);

struct Stall {
  int rank = -1;     // -1: no rank reached its first step before the start-up timeout
  int64_t step = 0;  // the rank's last reported step
  double stalled_s = 0, timeout_s = 0;
  bool startup = false;
};

class HangWatch {
 public:
  HangWatch(double factor, double floor_s, double startup_s, size_t window = 20);
  void start_attempt(double now);
  // `now` is the supervisor's clock when the beat was read (ranks' clocks may differ).
  void observe(const Heartbeat& hb, double now);
  double timeout_s() const;  // the current limit
  std::optional<Stall> check(double now) const;

 private:
  struct RankProgress {
    int64_t step = -1;
    BeatPhase phase = BeatPhase::kStart;
    double beat_time = 0;      // the rank's own clock, for intervals
    double last_progress = 0;  // supervisor clock
  };
  double factor_, floor_s_, startup_s_;
  size_t window_;
  double attempt_start_ = 0;
  bool stepped_ = false;
  std::map<int, RankProgress> ranks_;
  std::deque<double> intervals_;
};

}  // namespace zaya::aegis
