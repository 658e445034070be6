#include "data/document_sink.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace zaya {

DocumentSink::DocumentSink(const PrepareOptions& options, const std::string& dir,
                           const std::vector<std::string>& files, int64_t vocab_size, int32_t eos,
                           bool shard_lines)
    : options_(options),
      eos_(eos),
      report_(files),
      train_(dir, "train", options.shard_tokens, vocab_size, shard_lines),
      val_(dir, "val", options.shard_tokens, vocab_size, shard_lines) {
  if (options.id_key.empty()) return;
  ids_path_ = (std::filesystem::path(dir) / "documents.jsonl").string();
  ids_ = std::make_unique<std::ofstream>(ids_path_ + ".tmp", std::ios::binary);
  ZAYA_CHECK(ids_->good(), ids_path_, ".tmp: cannot create file");
}

void DocumentSink::take(int index, PartReader& part) {
  FileReport& file = report_.file(index);
  const std::string path = file.path;
  file = part.report();
  file.path = path;
  file.documents = file.tokens = 0;  // counted again: --dedup may drop some
  PartDocument d;
  while (part.next(d)) take_document(d.text_hash, d.id, d.tokens, file);
}

void DocumentSink::take(int index, Batch& batch) {
  FileReport& file = report_.file(index);
  for (TokenizedDocument& d : batch.documents)
    if (d.verdict.ok() && d.drop == DropReason::kNone)
      take_document(d.text_hash, d.id, d.tokens, file);
}

void DocumentSink::end_file(int index, const FileReport& part_report) {
  FileReport& file = report_.file(index);
  const FileReport counted = file;
  file = part_report;
  file.path = counted.path;
  file.documents = counted.documents;
  file.tokens = counted.tokens;
  file.duplicates = counted.duplicates;
}

void DocumentSink::take_document(const uint64_t (&text_hash)[2], const std::string& id,
                                 std::span<const int32_t> tokens, FileReport& file) {
  if (options_.dedup_exact && !seen_.insert({text_hash[0], text_hash[1]}).second) {
    ++file.duplicates;
    return;
  }
  const bool is_val = is_validation_document(options_.seed, documents_, options_.val_fraction);
  SplitWriter& split = is_val ? val_ : train_;
  const int64_t with_eos = int64_t(tokens.size()) + 1;
  if (ids_) write_id(id, is_val, split.tokens_added(), with_eos);
  // The eos goes in on its own: pushing it onto `tokens` reallocated most vectors (a copy each).
  split.add(tokens);
  split.add({&eos_, 1});
  ++documents_;
  train_documents_ += !is_val;
  ++file.documents;
  file.tokens += with_eos;
}

void DocumentSink::write_id(const std::string& id, bool is_val, int64_t offset, int64_t tokens) {
  const nlohmann::json line = {
      {"id", id}, {"split", is_val ? "val" : "train"}, {"offset", offset}, {"tokens", tokens}};
  *ids_ << line.dump() << '\n';
}

void DocumentSink::finish() {
  train_.finish();
  val_.finish();
  if (!ids_) return;
  ids_->flush();
  ZAYA_CHECK(ids_->good(), ids_path_, ".tmp: write failed");
  ids_.reset();
  std::filesystem::rename(ids_path_ + ".tmp", ids_path_);
}

}  // namespace zaya
