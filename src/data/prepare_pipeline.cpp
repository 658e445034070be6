#include "data/prepare_pipeline.h"

#include <algorithm>
#include <functional>
#include <string_view>

#include "core/error.h"
#include "data/checksum.h"
#include "io/utf8_check.h"

namespace zaya {

namespace {

bool is_blank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
  });
}

}  // namespace

OrderedPipeline::OrderedPipeline(PipelineConfig config, const TextEncoder& encoder)
    : config_(std::move(config)), encoder_(encoder) {
  ZAYA_CHECK(config_.threads >= 1, "--threads ", config_.threads, ": expected at least 1");
  if (config_.max_in_flight <= 0) config_.max_in_flight = 2 * config_.threads + 2;
  // Worker 0 uses the caller's encoder (nobody else encodes with it meanwhile); the others get
  // copies, made before any thread starts (a copy that fails then leaves no thread to join).
  for (int i = 1; i < config_.threads; ++i) copies_.push_back(encoder.clone());
  try {
    threads_.emplace_back([this] { read_all(); });
    if (config_.threads == 1) return;  // next() tokenizes on the caller's thread
    for (int i = 0; i < config_.threads; ++i) {
      const TextEncoder* mine = i == 0 ? &encoder : copies_[size_t(i - 1)].get();
      threads_.emplace_back([this, mine] { work(*mine); });
    }
  } catch (...) {  // a thread that could not start: the destructor will not run, stop the others
    stop_and_join();
    throw;
  }
}

OrderedPipeline::~OrderedPipeline() {
  stop_and_join();
}

void OrderedPipeline::stop_and_join() {
  {
    const std::lock_guard lock(mutex_);
    cancelled_ = true;
  }
  room_.notify_all();
  work_ready_.notify_all();
  result_ready_.notify_all();
  for (auto& t : threads_) t.join();
}

bool OrderedPipeline::next(Batch& batch) {
  if (config_.threads == 1) {  // the reader's batches come in order: tokenize them here
    {
      std::unique_lock lock(mutex_);
      work_ready_.wait(lock, [&] { return !todo_.empty() || reader_done_; });
      if (todo_.empty()) return false;
      batch = std::move(todo_.front());
      todo_.pop_front();
      ++consumed_;
    }
    room_.notify_one();
    try {
      process(batch, encoder_);
    } catch (const std::exception& e) {
      batch.fatal = e.what();
    }
    return true;
  }
  std::unique_lock lock(mutex_);
  result_ready_.wait(lock, [&] {
    return finished_.count(consumed_) > 0 || (reader_done_ && consumed_ == produced_);
  });
  const auto it = finished_.find(consumed_);
  if (it == finished_.end()) return false;
  batch = std::move(it->second);
  finished_.erase(it);
  ++consumed_;
  room_.notify_one();
  return true;
}

void OrderedPipeline::read_all() {
  Batch batch;
  while (reader_.next(batch))
    if (!emit(batch)) break;
  {
    const std::lock_guard lock(mutex_);
    reader_done_ = true;
  }
  work_ready_.notify_all();
  result_ready_.notify_all();
}

bool BatchReader::next(Batch& batch) {
  if (stopped_ || file_ >= int(config_.files.size())) return false;
  batch = Batch{};
  batch.file = file_;
  if (!reader_) {
    try {
      reader_ = std::make_unique<RecordReader>(config_.files[size_t(file_)], config_.read);
    } catch (const std::exception& e) {
      batch.fatal = e.what();
      batch.file_done = true;
      stopped_ = true;
      return true;
    }
  }
  batch.format = reader_->format();
  batch.compression = reader_->compression();
  size_t bytes = 0;
  try {
    Record record;
    while (reader_->next(record)) {
      bytes += record.bytes.size();
      batch.records.push_back(std::move(record));
      if (bytes < config_.batch_bytes) continue;
      batch.content_bytes = reader_->content_bytes();
      batch.file_bytes = reader_->file_bytes();
      return true;
    }
  } catch (const std::exception& e) {
    batch.stream_problem = {BadRecord::kDamagedStream, e.what()};
  }
  batch.file_done = true;
  batch.content_bytes = reader_->content_bytes();
  batch.file_bytes = reader_->file_bytes();
  if (!batch.stream_problem.ok() && !config_.keep_going) stopped_ = true;
  reader_.reset();
  ++file_;
  return true;
}

bool OrderedPipeline::emit(Batch& batch) {
  std::unique_lock lock(mutex_);
  room_.wait(lock, [&] { return cancelled_ || produced_ - consumed_ < config_.max_in_flight; });
  if (cancelled_) return false;
  batch.sequence = produced_++;
  todo_.push_back(std::move(batch));
  work_ready_.notify_one();
  return true;
}

void OrderedPipeline::work(const TextEncoder& encoder) {
  while (true) {
    Batch batch;
    {
      std::unique_lock lock(mutex_);
      work_ready_.wait(lock, [&] { return cancelled_ || !todo_.empty() || reader_done_; });
      if (cancelled_ || todo_.empty()) return;
      batch = std::move(todo_.front());
      todo_.pop_front();
    }
    try {
      process(batch, encoder);
    } catch (const std::exception& e) {
      batch.fatal = e.what();
    }
    {
      const std::lock_guard lock(mutex_);
      const int64_t sequence = batch.sequence;
      finished_.emplace(sequence, std::move(batch));
    }
    result_ready_.notify_all();
  }
}

void OrderedPipeline::process(Batch& batch, const TextEncoder& encoder) const {
  const std::string& path = config_.files[size_t(batch.file)];
  batch.documents.resize(batch.records.size());
  Document doc;
  for (size_t i = 0; i < batch.records.size(); ++i) {
    TokenizedDocument& d = batch.documents[i];
    d.verdict = to_document(batch.records[i], batch.format, config_.read, path, doc);
    if (!d.verdict.ok()) continue;
    d.text_bytes = int64_t(doc.text.size());
    d.id = std::move(doc.id);
    if (is_blank(doc.text)) {
      d.drop = DropReason::kEmpty;
    } else if (config_.min_chars > 0 && int64_t(utf8_length(doc.text)) < config_.min_chars) {
      d.drop = DropReason::kTooShort;
    } else {
      if (config_.hash_texts) {
        d.text_hash[0] = std::hash<std::string_view>{}(doc.text);
        d.text_hash[1] = fnv1a64(doc.text.data(), doc.text.size());
      }
      d.tokens = encoder.encode(doc.text);
    }
  }
  batch.records = {};  // the texts are no longer needed: free them before the batch waits
}

}  // namespace zaya
