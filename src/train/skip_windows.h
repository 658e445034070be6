// Skipped data windows: ranges of global sample indices that a run must never train on (Aegis adds
// one when a step's loss went NaN or spiked and it rolled the run back). They live in
// OUT/skip_windows.json, a JSON list of {"begin": g0, "end": g1, "reason": "..."} (end exclusive).
// The trainer maps every sample index it draws through next_unskipped, so a skip is a pure
// function of the file: every restart of the run skips the same samples.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zaya {

struct SkipWindow {
  int64_t begin = 0, end = 0;  // [begin, end)
  std::string reason;
};

std::string skip_windows_path(const std::string& out_dir);

class SkipWindows {
 public:
  SkipWindows() = default;
  explicit SkipWindows(std::vector<SkipWindow> windows);  // any order, may overlap
  // OUT/skip_windows.json; a missing file means no windows. Errors name the file and entry.
  static SkipWindows load(const std::string& out_dir);

  // The smallest index >= g that lies in no window.
  int64_t next_unskipped(int64_t g) const;
  const std::vector<SkipWindow>& windows() const { return windows_; }  // sorted by begin

 private:
  std::vector<SkipWindow> windows_;
};

// Appends a window to OUT/skip_windows.json (rewritten atomically and durably).
void add_skip_window(const std::string& out_dir, const SkipWindow& window);

}  // namespace zaya
