#include "aegis/straggler_watch.h"

#include <algorithm>

namespace zaya::aegis {

std::vector<StragglerReport> StragglerWatch::observe(const Heartbeat& hb) {
  hosts_[hb.rank] = hb.host;
  if (hb.phase != BeatPhase::kStep) return {};
  auto& times = pending_[hb.step];
  times[hb.rank] = hb.step_time_s;
  if (times.size() < hosts_.size()) return {};
  const std::map<int, double> complete = times;
  // Steps up to this one are settled (a rank that skipped reporting one will not come back to it).
  pending_.erase(pending_.begin(), pending_.upper_bound(hb.step));
  return judge(hb.step, complete);
}

std::vector<StragglerReport> StragglerWatch::judge(int64_t step,
                                                   const std::map<int, double>& times) {
  std::vector<StragglerReport> reports;
  if (times.size() < 2) return reports;
  for (const auto& [rank, t] : times) {
    std::vector<double> others;
    for (const auto& [r, o] : times)
      if (r != rank) others.push_back(o);
    std::sort(others.begin(), others.end());
    const size_t n = others.size();
    const double median = n % 2 ? others[n / 2] : 0.5 * (others[n / 2 - 1] + others[n / 2]);
    if (median <= 0 || t <= factor_ * median) {
      streak_[rank] = 0;
      reported_.erase(rank);
      continue;
    }
    if (++streak_[rank] >= persist_ && reported_.insert(rank).second)
      reports.push_back({rank, hosts_[rank], step, t, median});
  }
  return reports;
}

}  // namespace zaya::aegis
