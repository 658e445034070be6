// The streaming core of `zaya data prepare`: a reader thread cuts the input files into records
// (decompressing them) and batches them (about batch_bytes each, never spanning two files), the
// records are turned into documents and tokenized, and the caller takes the batches back strictly
// in input order. With threads == 1 the caller tokenizes each batch itself in next() while the
// reader works ahead (as `zstd -dc | tokenizer` would overlap them); with more, `threads` workers
// tokenize beside the caller, which is left the writing. At most max_in_flight batches exist at
// once (queued, in work or finished and waiting for their turn), so memory depends on the thread
// count, never on the corpus size, and what the caller sees does not depend on the thread count
// or on timing.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "data/text_encoder.h"
#include "io/document_reader.h"

namespace zaya {

// Why a well-formed document is dropped (not an error; counted in the report).
enum class DropReason { kNone, kEmpty, kTooShort };

struct TokenizedDocument {
  RecordVerdict verdict;  // refused records carry their reason and FILE:LINE message
  DropReason drop = DropReason::kNone;
  int64_t text_bytes = 0;
  uint64_t text_hash[2] = {0, 0};  // with PipelineConfig::hash_texts: two independent 64-bit hashes
  std::string id;
  std::vector<int32_t> tokens;  // without the eos
};

struct Batch {
  int64_t sequence = 0;
  int file = 0;  // index into PipelineConfig::files
  std::vector<Record> records;
  std::vector<TokenizedDocument> documents;  // one per record, filled by a worker
  bool file_done = false;                    // the file's last batch
  InputFormat format = InputFormat::kText;
  Compression compression = Compression::kNone;
  int64_t content_bytes = 0, file_bytes = 0;  // read of the file up to this batch's end
  // A damaged or truncated stream ends the file early: kDamagedStream with its message.
  RecordVerdict stream_problem;
  std::string fatal;  // an error that stops everything (a file that cannot be opened)
};

struct PipelineConfig {
  std::vector<std::string> files;
  ReadOptions read;
  int threads = 1;
  bool hash_texts = false;  // for --dedup
  int64_t min_chars = 0;
  bool keep_going = false;  // read the next file after a damaged stream (--skip-bad)
  size_t batch_bytes = size_t(1) << 20;
  int max_in_flight = 0;  // 0: 2 * threads + 2
};

// Cuts the files into batches in input order; a file that cannot be opened, or a damaged stream
// without keep_going, ends the sequence after the batch that reports it.
class BatchReader {
 public:
  explicit BatchReader(const PipelineConfig& config) : config_(config) {}
  bool next(Batch& batch);  // false after the last batch

 private:
  const PipelineConfig& config_;
  int file_ = 0;
  std::unique_ptr<RecordReader> reader_;  // the open file_
  bool stopped_ = false;
};

class OrderedPipeline {
 public:
  // Starts the reader and the workers (none with config.threads == 1); each worker but the first
  // encodes with a copy of `encoder` (tokenizers keep per-object caches), which must outlive the
  // pipeline.
  OrderedPipeline(PipelineConfig config, const TextEncoder& encoder);
  ~OrderedPipeline();  // stops and joins the threads, also when the caller gave up early
  OrderedPipeline(const OrderedPipeline&) = delete;
  OrderedPipeline& operator=(const OrderedPipeline&) = delete;

  // The next batch in input order; false after the last.
  bool next(Batch& batch);

 private:
  void read_all();
  void stop_and_join();
  bool emit(Batch& batch);  // hands a batch to the workers, waiting for room; false: cancelled
  void work(const TextEncoder& encoder);
  void process(Batch& batch, const TextEncoder& encoder) const;

  PipelineConfig config_;
  const TextEncoder& encoder_;
  BatchReader reader_{config_};  // read by the reader thread
  std::mutex mutex_;
  std::condition_variable room_, work_ready_, result_ready_;
  std::deque<Batch> todo_;
  std::map<int64_t, Batch> finished_;
  int64_t produced_ = 0, consumed_ = 0;
  bool reader_done_ = false, cancelled_ = false;
  std::vector<std::unique_ptr<TextEncoder>> copies_;  // the encoders of workers 1, 2, ...
  std::vector<std::thread> threads_;
};

}  // namespace zaya
