// A one-line progress display on stderr for long reads: bytes in (MB/s), documents/s, tokens/s
// and the time left, estimated from the input files' sizes on disk. Redrawn in place at most
// twice a second, and only when stderr is a terminal (logs get no carriage-return soup).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace zaya {

class ProgressMeter {
 public:
  // total_file_bytes: the inputs' sizes on disk (compressed sizes for compressed files).
  ProgressMeter(std::string label, int64_t total_file_bytes, bool wanted);
  bool active() const { return active_; }
  void update(int64_t file_bytes_done, int64_t content_bytes, int64_t documents, int64_t tokens);
  void finish();  // ends the line

 private:
  using Clock = std::chrono::steady_clock;
  std::string label_;
  int64_t total_;
  bool active_;
  Clock::time_point start_, last_draw_;
};

}  // namespace zaya
