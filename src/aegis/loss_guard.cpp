#include "aegis/loss_guard.h"

#include <algorithm>
#include <cmath>

namespace zaya::aegis {

LossVerdict judge_loss(const std::vector<double>& window, double x, double z_threshold) {
  LossVerdict v;
  if (!std::isfinite(x)) {
    v.kind = LossVerdict::Kind::NonFinite;
    return v;
  }
  if (window.empty()) return v;
  double sum = 0;
  for (double w : window) sum += w;
  v.mean = sum / double(window.size());
  double var = 0;
  for (double w : window) var += (w - v.mean) * (w - v.mean);
  v.stddev = std::max(std::sqrt(var / double(window.size())), 0.005 * std::fabs(v.mean));
  if (v.stddev <= 0) return v;  // an all-zero window: nothing to compare against
  v.z = (x - v.mean) / v.stddev;
  if (v.z > z_threshold) v.kind = LossVerdict::Kind::Spike;
  return v;
}

LossVerdict LossGuard::observe(int64_t step, double loss) {
  while (!history_.empty() && history_.back().first >= step) history_.pop_back();
  std::vector<double> window;
  if (history_.size() >= window_)
    for (size_t i = history_.size() - window_; i < history_.size(); ++i)
      window.push_back(history_[i].second);
  LossVerdict v = judge_loss(window, loss, z_);
  if (v.kind == LossVerdict::Kind::Ok) history_.emplace_back(step, loss);
  // Only the window is ever read: keep the history bounded on long runs.
  if (history_.size() > 4 * window_ + 64)
    history_.erase(history_.begin(), history_.end() - std::ptrdiff_t(window_));
  return v;
}

}  // namespace zaya::aegis
