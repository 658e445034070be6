#include "data/progress_meter.h"

#include <unistd.h>

#include <cstdio>

namespace zaya {

namespace {

std::string duration_text(double s) {
  char buf[32];
  const long t = long(s + 0.5);
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, t / 60 % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  return buf;
}

}  // namespace

ProgressMeter::ProgressMeter(std::string label, int64_t total_file_bytes, bool wanted)
    : label_(std::move(label)),
      total_(total_file_bytes),
      active_(wanted && ::isatty(STDERR_FILENO)),
      start_(Clock::now()),
      last_draw_(start_) {}

void ProgressMeter::update(int64_t file_bytes_done, int64_t content_bytes, int64_t documents,
                           int64_t tokens) {
  if (!active_) return;
  const auto now = Clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(500)) return;
  last_draw_ = now;
  const double s = std::chrono::duration<double>(now - start_).count();
  const double done = total_ > 0 ? double(file_bytes_done) / double(total_) : 0;
  const std::string eta = done > 0 ? duration_text(s * (1 - done) / done) : "?";
  std::fprintf(stderr,
               "\r%s: %3.0f%%  %.1f MB (%.1f MB/s)  %lld docs (%.0f/s)  %lld tokens (%.2fM/s)  "
               "ETA %s   ",
               label_.c_str(), 100 * done, double(content_bytes) / 1e6,
               double(content_bytes) / 1e6 / s, static_cast<long long>(documents),
               double(documents) / s, static_cast<long long>(tokens), double(tokens) / 1e6 / s,
               eta.c_str());
  std::fflush(stderr);
}

void ProgressMeter::finish() {
  if (active_) std::fprintf(stderr, "\n");
}

}  // namespace zaya
