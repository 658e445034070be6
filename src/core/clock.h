// Wall-clock intervals for progress lines, timeouts and benchmarks: the steady clock, so that a
// change of the system time never makes an interval negative.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace zaya {

// Seconds from `t0` to now.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A duration for a progress line: "1h05m" from an hour, else "4m07s".
inline std::string format_duration(double s) {
  char b[32];
  const int t = int(s + 0.5);
  if (t >= 3600)
    std::snprintf(b, sizeof(b), "%dh%02dm", t / 3600, t / 60 % 60);
  else
    std::snprintf(b, sizeof(b), "%dm%02ds", t / 60, t % 60);
  return b;
}

}  // namespace zaya
