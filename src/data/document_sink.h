// The ordered end of `zaya data prepare`: takes the input files' documents in input order, from
// their parts (prepare_parts.h) or, on one rank, straight from the pipeline's batches as their
// parts are written, and decides each candidate document's fate: with dedup, a repeated text is
// counted and dropped, and the rest go whole to the train or the validation split by their number
// among kept documents. Single-threaded by design: every decision here depends on the order, so the
// output cannot depend on timing, on the thread count or on which rank wrote which part.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <unordered_set>

#include "data/prepare.h"
#include "data/prepare_parts.h"
#include "data/prepare_report.h"
#include "data/split_writer.h"

namespace zaya {

class DocumentSink {
 public:
  DocumentSink(const PrepareOptions& options, const std::string& dir,
               const std::vector<std::string>& files, int64_t vocab_size, int32_t eos,
               bool shard_lines);

  // Takes every document of input file `file` from its part.
  void take(int file, PartReader& part);
  // Takes the kept documents of one of input file `file`'s batches (PartSink::take has seen it
  // first: refused records were counted or stopped the run); `file_done` batches end with
  // end_file and the report PartSink wrote into the part's footer.
  void take(int file, Batch& batch);
  void end_file(int file, const FileReport& part_report);
  // Writes the last shards and moves documents.jsonl into place.
  void finish();

  const PrepareReport& report() const { return report_; }
  const SplitWriter& train() const { return train_; }
  const SplitWriter& val() const { return val_; }
  int64_t documents() const { return documents_; }
  int64_t train_documents() const { return train_documents_; }
  int64_t val_documents() const { return documents_ - train_documents_; }

 private:
  struct TextHash {
    uint64_t a, b;
    bool operator==(const TextHash&) const = default;
  };
  struct TextHashHasher {
    size_t operator()(const TextHash& h) const { return size_t(h.a); }
  };

  void take_document(const uint64_t (&text_hash)[2], const std::string& id,
                     std::span<const int32_t> tokens, FileReport& file);
  void write_id(const std::string& id, bool is_val, int64_t offset, int64_t tokens);

  const PrepareOptions& options_;
  int32_t eos_;
  PrepareReport report_;
  SplitWriter train_, val_;
  std::unordered_set<TextHash, TextHashHasher> seen_;
  std::string ids_path_;
  std::unique_ptr<std::ofstream> ids_;
  int64_t documents_ = 0, train_documents_ = 0;
};

}  // namespace zaya
