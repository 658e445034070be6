// Splits one input file, streamed through ByteStream, into records: the lines of a JSON Lines
// file, or the separator-delimited documents of a text file (trimmed of surrounding whitespace,
// empty ones dropped; the end of the file ends a document). Memory is one read chunk plus the
// longest record, whatever the file's size, and a record longer than max_record_bytes is refused
// as soon as that many bytes of it were read. Records are raw bytes: parsing and checking them is
// to_document's job (document_reader.h), so that it can run on worker threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "io/byte_stream.h"

namespace zaya {

enum class InputFormat { kAuto, kText, kJsonl };
const char* input_format_name(InputFormat f);

// The longest line or document a reader buffers (--max-record-bytes): far above any real record,
// far below the memory of the machine.
constexpr int64_t kDefaultMaxRecordBytes = int64_t(64) << 20;
struct ReadOptions {
  InputFormat format = InputFormat::kAuto;  // kAuto: by name, else by content
  std::string doc_separator = "\n\n";       // text files only
  std::string text_key = "text";            // JSON Lines: dotted path of the text field
  std::string id_key;                       // JSON Lines: dotted path of an id; empty = none
  int64_t max_record_bytes = kDefaultMaxRecordBytes;  // a longer line or document is an error
  StreamLimits stream;                                // the decompression guard
};

struct Record {
  std::string bytes;   // a JSON line, or one trimmed text document
  int64_t line = 0;    // 1-based line of the file where the record starts
  int64_t offset = 0;  // byte offset (in the decompressed content) where it starts
};

class RecordReader {
 public:
  // Opens `path`; errors name it. kAuto resolves by name (.jsonl/.json/.ndjson: JSON Lines;
  // .txt/.text/.md: text; a .gz/.zst/.zstd suffix is looked through) and otherwise by content
  // (JSON Lines when the first non-blank byte is '{').
  RecordReader(std::string path, const ReadOptions& options);

  // The next record; false at the end of the file. A damaged or truncated compressed stream
  // throws zaya::Error naming the file and byte offset (a record cut short is never returned); a
  // record longer than max_record_bytes throws naming FILE:LINE, the limit and its flag.
  bool next(Record& record);

  InputFormat format() const { return format_; }
  Compression compression() const { return compression_; }
  const std::string& path() const { return path_; }
  int64_t content_bytes() const { return offset_; }  // decompressed bytes consumed so far
  int64_t file_bytes() const { return stream_->file_offset(); }

 private:
  bool fill();  // appends a chunk; false at the end of the stream
  bool next_line(Record& record);
  bool next_text_document(Record& record);
  // Moves past `bytes` bytes of the buffer, keeping line and offset counts.
  void consume(size_t bytes);
  // The same, when the caller knows that those bytes hold `newlines` line ends.
  void advance(size_t bytes, int64_t newlines);
  // Throws when the record from begin_ to `end` (not yet complete, or complete) is too long.
  void check_length(size_t end) const;

  std::string path_, separator_;
  size_t max_record_bytes_;
  std::unique_ptr<ByteStream> stream_;
  Compression compression_ = Compression::kNone;
  InputFormat format_ = InputFormat::kText;
  std::string buffer_;
  size_t begin_ = 0;      // first unconsumed byte of buffer_
  size_t scan_from_ = 0;  // no delimiter starts before this
  int64_t line_ = 1, offset_ = 0;
  bool at_end_ = false;
};

}  // namespace zaya
