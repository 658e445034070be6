// Loss checks on every step a rank reports: a NaN/Inf loss, or a spike, a loss whose z-score
// against the previous `window` steps' losses exceeds the threshold (only rises count). The
// spread is floored at 0.5 % of the mean so that a very flat loss curve doesn't turn noise into
// spikes, and a spike is judged only once a full window is known. A step at or before the last
// one seen (the run was restarted from a checkpoint) replaces the history from that step on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace zaya::aegis {

struct LossVerdict {
  enum class Kind { Ok, NonFinite, Spike };
  Kind kind = Kind::Ok;
  double z = 0, mean = 0, stddev = 0;  // of the window the loss was judged against
};

// z-score of x against the values (mean, floored population standard deviation).
LossVerdict judge_loss(const std::vector<double>& window, double x, double z_threshold);

class LossGuard {
 public:
  LossGuard(double z_threshold, int window) : z_(z_threshold), window_(size_t(window)) {}
  LossVerdict observe(int64_t step, double loss);

 private:
  double z_;
  size_t window_;
  std::vector<std::pair<int64_t, double>> history_;  // (step, finite loss), ascending steps
};

}  // namespace zaya::aegis
