// `zaya data prepare`: input files (text, JSON Lines; plain, gzip or zstd) -> documents -> token
// ids -> train/val shards + index.json, streamed in bounded memory on `threads` tokenizer threads.
// The output depends only on the inputs and the options, never on the thread count.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/text_encoder.h"
#include "io/record_reader.h"

namespace zaya {

namespace dist {
class Communicator;
}

struct PrepareOptions {
  std::vector<std::string> inputs;  // files, directories or glob patterns, read in order
  std::string out_dir;              // shards go to out_dir/name/
  std::string name;                 // source name, e.g. "brown"
  std::string tokenizer = "bytes";  // recorded in index.json (the encoder itself is passed in)
  double val_fraction = 0.05;       // share of documents held out for validation
  int64_t shard_tokens = 50'000'000;
  std::string doc_separator = "\n\n";  // text files
  InputFormat format = InputFormat::kAuto;
  std::string text_key = "text";  // JSON Lines: dotted path of the text
  std::string id_key;             // JSON Lines: dotted path of an id, kept in documents.jsonl
  // Bounds on the reading (not part of the output: a run that ends within them is unchanged).
  int64_t max_record_bytes = kDefaultMaxRecordBytes;
  double max_decompression_ratio = kDefaultMaxDecompressionRatio;
  uint64_t seed = 0;         // seeds the train/val split
  int threads = 1;           // tokenizer threads
  bool dedup_exact = false;  // drop documents whose text was seen before
  int64_t min_chars = 0;     // drop documents with fewer characters (code points)
  bool skip_bad = false;     // skip and count bad records instead of stopping
  bool progress = true;      // progress on stderr
  bool resume = false;       // keep the finished parts of an interrupted run (prepare_parts.h)
  bool force = false;        // replace an existing DIR/NAME that this run did not make
};

struct PrepareSummary {
  int64_t documents = 0, train_documents = 0, val_documents = 0;
  int64_t input_bytes = 0;
  int64_t train_tokens = 0, val_tokens = 0;
  int64_t train_shards = 0, val_shards = 0;
  double elapsed_s = 0;
  std::string source_dir;  // out_dir/name
  std::string dropped;     // lines naming what was skipped or dropped and why ("" when nothing)
};

// Splits `text` at `separator` and trims surrounding whitespace; empty documents are dropped.
std::vector<std::string_view> split_documents(std::string_view text, std::string_view separator);

// Whether document number `doc_index` (counted over all inputs, from 0) is held out: a pure
// function of (seed, doc_index), so re-running on the same inputs gives the same split.
bool is_validation_document(uint64_t seed, int64_t doc_index, double val_fraction);

// Writes out_dir/name/{train-NNNNN.bin, val-NNNNN.bin, index.json}. Each document's tokens are
// followed by encoder.eos_id(); documents may span shard boundaries. Every input file is first
// tokenized into a part (out_dir/name/.prepare/, prepare_parts.h), then the parts are read in
// input order into the shards; index.json is written last, so its presence marks a complete
// source, and the parts are removed after it. With a communicator of several ranks, each rank
// tokenizes its share of the files (files_of_rank) and rank 0 writes the shards; the output is
// the same at any rank count. Collective: every rank calls it, and every rank throws when one
// fails.
PrepareSummary prepare_source(const PrepareOptions& options, const TextEncoder& encoder,
                              dist::Communicator* comm = nullptr);

}  // namespace zaya
