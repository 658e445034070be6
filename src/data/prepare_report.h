// What `zaya data prepare` read and kept, per input file and in total: printed at the end and
// stored in index.json under "report". Every record that did not become training data is counted
// by its reason, so nothing is dropped silently.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/document_reader.h"

namespace zaya {

struct FileReport {
  std::string path;
  InputFormat format = InputFormat::kText;
  Compression compression = Compression::kNone;
  int64_t file_bytes = 0, content_bytes = 0;       // on disk, and after decompression
  int64_t documents = 0, tokens = 0;               // kept documents and their tokens (eos included)
  std::array<int64_t, kBadRecordKinds> skipped{};  // refused records by BadRecord (--skip-bad)
  int64_t empty = 0, too_short = 0, duplicates = 0;
};

class PrepareReport {
 public:
  explicit PrepareReport(const std::vector<std::string>& files);

  FileReport& file(int index) { return files_.at(size_t(index)); }
  const std::vector<FileReport>& files() const { return files_; }
  FileReport total() const;  // the sums (path empty)

  // {"documents", "content_bytes", "file_bytes", "tokens", "tokens_per_byte", "skipped": {reason:
  // n}, "dropped": {"empty", "too_short", "duplicate"}, "files": [{"path", "format",
  // "compression", ... per file}]}
  nlohmann::json to_json() const;
  // Lines for the terminal: what was skipped or dropped, and why (nothing when nothing was).
  std::string dropped_summary() const;

 private:
  std::vector<FileReport> files_;
};

}  // namespace zaya
