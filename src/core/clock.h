// Wall-clock intervals for progress lines, timeouts and benchmarks: the steady clock, so that a
// change of the system time never makes an interval negative.
#pragma once

#include <chrono>

namespace zaya {

// Seconds from `t0` to now.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace zaya
