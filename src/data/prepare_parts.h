// The restartable middle of `zaya data prepare`: every input file is tokenized into its own part
// file (WORK/NNNNNN.part, WORK = DIR/NAME/.prepare), which holds the file's candidate documents in
// order (text hashes for --dedup, ids, tokens) and a footer with what was read, skipped and
// dropped. A part is written to a temporary file and renamed into place only when complete, and
// its footer states its own length and checksum, so a part that exists and matches them is a
// finished file's work: `--resume` keeps it and redoes only the input files without one. Tokens
// are stored 2 bytes wide when the vocabulary fits (as in the shards), else 4. The decisions that
// need every earlier document (dedup, the train/val split, the shards) are taken afterwards, in
// input order, by DocumentSink. Parts are also how ranks divide the files: each rank writes the
// parts of its own files.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "data/checksum.h"
#include "data/prepare.h"
#include "data/prepare_pipeline.h"
#include "data/prepare_report.h"

namespace zaya {

struct PartDocument {
  uint64_t text_hash[2] = {0, 0};
  std::string id;
  std::vector<int32_t> tokens;  // without the eos
};

// A part's path for input file `index`.
std::string part_path(const std::string& work_dir, int index);

class PartWriter {
 public:
  PartWriter(std::string path, int64_t vocab_size);  // writes path + ".tmp"
  ~PartWriter();                                     // unfinished: removes the temporary file
  PartWriter(const PartWriter&) = delete;
  PartWriter& operator=(const PartWriter&) = delete;

  void add(const TokenizedDocument& d);
  // Writes the footer (the report's counts; documents and tokens are the candidates written)
  // and renames the part into place.
  void commit(const FileReport& report);

 private:
  void write(const void* data, size_t bytes);

  std::string path_, tmp_;
  std::FILE* file_ = nullptr;
  bool narrow_ = false;  // 2-byte tokens
  std::vector<uint16_t> narrowed_;
  int64_t body_bytes_ = 0, documents_ = 0, tokens_ = 0;
  WordHash hash_;  // of the body
};

class PartReader {
 public:
  // Validates the magic, the footer and the length; an incomplete part is an error naming it.
  explicit PartReader(std::string path);
  ~PartReader();
  PartReader(const PartReader&) = delete;
  PartReader& operator=(const PartReader&) = delete;

  // What phase 1 counted (documents and tokens: the candidates, before --dedup).
  const FileReport& report() const { return report_; }
  bool next(PartDocument& d);  // false after the last document

 private:
  void read(void* data, size_t bytes);

  std::string path_;
  std::FILE* file_ = nullptr;
  FileReport report_;
  int64_t left_ = 0, token_bytes_ = 4;
  std::vector<uint16_t> narrowed_;
};

// Whether `path` is a complete part (exists; magic, footer, length and checksum agree). Reads it
// whole.
bool part_is_complete(const std::string& path);

// Takes the pipeline's batches in order and writes one part per input file: a refused record
// stops the run (or, with skip_bad, is counted), empty and too short documents are counted, the
// rest are written. `files[i]` has the global index `indices[i]`.
class PartSink {
 public:
  PartSink(const PrepareOptions& options, std::string work_dir, std::vector<std::string> files,
           std::vector<int> indices, int64_t vocab_size);
  ~PartSink();

  void take(Batch& batch);
  const FileReport& last_file() const { return report_; }  // after a batch with file_done
  int64_t documents() const { return documents_; }
  int64_t tokens() const { return tokens_; }
  int64_t file_bytes_done() const { return file_bytes_done_; }
  int64_t content_bytes_done() const { return content_bytes_done_; }

 private:
  void refuse(const RecordVerdict& verdict);

  const PrepareOptions& options_;
  int64_t vocab_size_;
  std::string work_dir_;
  std::vector<std::string> files_;
  std::vector<int> indices_;
  std::unique_ptr<PartWriter> writer_;
  FileReport report_;
  int64_t documents_ = 0, tokens_ = 0, file_bytes_done_ = 0, content_bytes_done_ = 0;
};

}  // namespace zaya
