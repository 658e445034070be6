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

void DocumentSink::take(Batch& batch) {
  if (!batch.fatal.empty()) ZAYA_FAIL(batch.fatal);
  FileReport& file = report_.file(batch.file);
  file.format = batch.format;
  file.compression = batch.compression;
  for (TokenizedDocument& d : batch.documents) take_document(d, file);
  if (!batch.stream_problem.ok()) refuse(batch.stream_problem, file);
  if (batch.stream_problem.ok() || options_.skip_bad) {
    file.content_bytes = batch.content_bytes;
    file.file_bytes = batch.file_bytes;
  }
  if (batch.file_done) {
    file_bytes_done_ += file.file_bytes;
    content_bytes_done_ += file.content_bytes;
  }
}

void DocumentSink::refuse(const RecordVerdict& verdict, FileReport& file) const {
  if (!options_.skip_bad)
    ZAYA_FAIL(verdict.message, " (--skip-bad skips such input and counts it in index.json)");
  ++file.skipped[size_t(verdict.reason)];
}

void DocumentSink::take_document(TokenizedDocument& d, FileReport& file) {
  if (!d.verdict.ok()) return refuse(d.verdict, file);
  if (d.drop == DropReason::kEmpty) {
    ++file.empty;
    return;
  }
  if (d.drop == DropReason::kTooShort) {
    ++file.too_short;
    return;
  }
  if (options_.dedup_exact && !seen_.insert({d.text_hash[0], d.text_hash[1]}).second) {
    ++file.duplicates;
    return;
  }
  d.tokens.push_back(eos_);
  const bool is_val = is_validation_document(options_.seed, documents_, options_.val_fraction);
  SplitWriter& split = is_val ? val_ : train_;
  if (ids_) write_id(d.id, is_val, split.tokens_added(), int64_t(d.tokens.size()));
  split.add(d.tokens);
  ++documents_;
  train_documents_ += !is_val;
  ++file.documents;
  file.tokens += int64_t(d.tokens.size());
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
