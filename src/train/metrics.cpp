#include "train/metrics.h"

#include <fstream>

#include "core/error.h"

namespace zaya {

MetricsWriter::MetricsWriter(const std::string& path, bool append,
                             std::function<void(const nlohmann::json&)> on_record)
    : path_(path), on_record_(std::move(on_record)) {
  file_ = std::fopen(path.c_str(), append ? "a" : "w");
  ZAYA_CHECK(file_, "cannot write metrics file '", path, "'");
}

MetricsWriter::~MetricsWriter() {
  if (file_) std::fclose(file_);
}

void MetricsWriter::write(const nlohmann::json& record) {
  if (!file_) return;
  const std::string line = record.dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);
  if (on_record_) on_record_(record);
}

std::vector<nlohmann::json> read_metrics(const std::string& path, int* torn_tail) {
  std::ifstream in(path);
  ZAYA_CHECK(in.good(), "cannot open metrics file '", path, "'");
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  if (torn_tail) *torn_tail = 0;
  std::vector<nlohmann::json> out;
  for (size_t n = 0; n < lines.size(); ++n) {
    if (lines[n].empty()) continue;
    try {
      out.push_back(nlohmann::json::parse(lines[n]));
    } catch (const nlohmann::json::exception& e) {
      // A run killed in the middle of a write leaves a torn last line: the caller may drop it.
      // A bad line anywhere else is damage that someone should look at.
      if (torn_tail && n + 1 == lines.size()) {
        *torn_tail = 1;
        break;
      }
      ZAYA_FAIL(path, ":", n + 1, ": not a JSON object (", e.what(), ")");
    }
  }
  return out;
}

}  // namespace zaya
