// Training metrics as JSON lines (one object per step, flushed as written, so a crash loses at
// most the line being written), and reading them back for plots.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace zaya {

class MetricsWriter {
 public:
  MetricsWriter() = default;
  // Truncates, or appends (a resumed run continues its metrics). Each record written is also
  // handed to `on_record` when given (zaya train --metrics-port).
  explicit MetricsWriter(const std::string& path, bool append = false,
                         std::function<void(const nlohmann::json&)> on_record = {});
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  void write(const nlohmann::json& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  std::function<void(const nlohmann::json&)> on_record_;
};

// torn_tail, when given, accepts a last line that is not JSON (what a kill in the middle of a write
// leaves) and is set to 1 when one was dropped; without it every line must parse.
std::vector<nlohmann::json> read_metrics(const std::string& path, int* torn_tail = nullptr);

}  // namespace zaya
