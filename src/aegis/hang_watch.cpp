#include "aegis/hang_watch.h"

#include <algorithm>

namespace zaya::aegis {

double derive_hang_timeout(const std::deque<double>& recent_intervals_s, double factor,
                           double floor_s) {
  double longest = 0;
  for (double s : recent_intervals_s) longest = std::max(longest, s);
  return std::max(floor_s, factor * longest);
}

HangWatch::HangWatch(double factor, double floor_s, double startup_s, size_t window)
    : factor_(factor), floor_s_(floor_s), startup_s_(startup_s), window_(window) {}

void HangWatch::start_attempt(double now) {
  attempt_start_ = now;
  stepped_ = false;
  ranks_.clear();
  // The intervals stay: the run's pace does not change with a restart.
}

void HangWatch::observe(const Heartbeat& hb, double now) {
  RankProgress& r = ranks_[hb.rank];
  const bool progress = hb.step != r.step || hb.phase != r.phase;
  if (hb.phase == BeatPhase::kStep && r.phase == BeatPhase::kStep && hb.step == r.step + 1) {
    intervals_.push_back(hb.time - r.beat_time);
    if (intervals_.size() > window_) intervals_.pop_front();
  }
  if (hb.phase == BeatPhase::kStep) stepped_ = true;
  if (progress) r.last_progress = now;
  r.step = hb.step;
  r.phase = hb.phase;
  r.beat_time = hb.time;
}

double HangWatch::timeout_s() const {
  // The startup timeout holds until a step interval is known: between a run's first and second
  // step the pace is not known yet, and the floor alone (meant to sit under factor x interval)
  // cut a slow second step short under load (aegis.hang under ASan: a 1.1 s step against a 1 s
  // floor).
  return stepped_ && !intervals_.empty() ? derive_hang_timeout(intervals_, factor_, floor_s_)
                                         : startup_s_;
}

std::optional<Stall> HangWatch::check(double now) const {
  const double limit = timeout_s();
  if (!stepped_) {
    if (now - attempt_start_ <= limit) return std::nullopt;
    Stall s;
    s.stalled_s = now - attempt_start_;
    s.timeout_s = limit;
    s.startup = true;
    return s;
  }
  std::optional<Stall> worst;
  for (const auto& [rank, r] : ranks_) {
    if (r.phase == BeatPhase::kDone) continue;  // finished: the job is about to exit
    const double stalled = now - r.last_progress;
    if (stalled <= limit || (worst && worst->stalled_s >= stalled)) continue;
    worst = Stall{rank, r.step, stalled, limit, false};
  }
  return worst;
}

}  // namespace zaya::aegis
