// The ordered end of `zaya data prepare`: takes tokenized batches in input order and decides each
// document's fate: a refused record stops the run (or, with skip_bad, is counted), an empty, too
// short or (with dedup) repeated document is counted and dropped, and the rest go whole to the
// train or the validation split by their number among kept documents. Single-threaded by
// design: every decision here depends on the order, so the output cannot depend on timing.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <unordered_set>

#include "data/prepare.h"
#include "data/prepare_pipeline.h"
#include "data/prepare_report.h"
#include "data/split_writer.h"

namespace zaya {

class DocumentSink {
 public:
  DocumentSink(const PrepareOptions& options, const std::string& dir,
               const std::vector<std::string>& files, int64_t vocab_size, int32_t eos,
               bool shard_lines);

  void take(Batch& batch);
  // Writes the last shards and moves documents.jsonl into place.
  void finish();

  const PrepareReport& report() const { return report_; }
  const SplitWriter& train() const { return train_; }
  const SplitWriter& val() const { return val_; }
  int64_t documents() const { return documents_; }
  int64_t train_documents() const { return train_documents_; }
  int64_t val_documents() const { return documents_ - train_documents_; }
  int64_t file_bytes_done() const { return file_bytes_done_; }
  int64_t content_bytes_done() const { return content_bytes_done_; }

 private:
  struct TextHash {
    uint64_t a, b;
    bool operator==(const TextHash&) const = default;
  };
  struct TextHashHasher {
    size_t operator()(const TextHash& h) const { return size_t(h.a); }
  };

  void take_document(TokenizedDocument& d, FileReport& file);
  void refuse(const RecordVerdict& verdict, FileReport& file) const;
  void write_id(const std::string& id, bool is_val, int64_t offset, int64_t tokens);

  const PrepareOptions& options_;
  int32_t eos_;
  PrepareReport report_;
  SplitWriter train_, val_;
  std::unordered_set<TextHash, TextHashHasher> seen_;
  std::string ids_path_;
  std::unique_ptr<std::ofstream> ids_;
  int64_t documents_ = 0, train_documents_ = 0;
  int64_t file_bytes_done_ = 0, content_bytes_done_ = 0;  // of finished files
};

}  // namespace zaya
