#include "train/metrics.h"

#include <fstream>

#include "core/error.h"

namespace zaya {

MetricsWriter::MetricsWriter(const std::string& path, bool append) : path_(path) {
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
}

std::vector<nlohmann::json> read_metrics(const std::string& path) {
  std::ifstream in(path);
  ZAYA_CHECK(in.good(), "cannot open metrics file '", path, "'");
  std::vector<nlohmann::json> out;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    try {
      out.push_back(nlohmann::json::parse(line));
    } catch (const nlohmann::json::exception& e) {
      ZAYA_FAIL(path, ":", n, ": not a JSON object (", e.what(), ")");
    }
  }
  return out;
}

}  // namespace zaya
