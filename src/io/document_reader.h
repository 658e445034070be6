// Records (record_reader.h) into documents: a JSON line is parsed and its text field taken (a
// dotted path such as meta.body reaches into nested objects), a text document is taken as it is;
// either must be valid UTF-8 without NUL bytes. A record that cannot become a document says why
// (the reason's name is what `zaya data prepare --skip-bad` counts) in a message naming
// FILE:LINE. DocumentReader strings the two together for callers that stop at the first problem.
#pragma once

#include <cstdint>
#include <string>

#include "io/record_reader.h"

namespace zaya {

// Why a record was refused. kDamagedStream is raised by the file, not a record: the rest of a
// truncated or corrupt compressed file is lost.
enum class BadRecord {
  kNone,
  kBadJson,
  kMissingKey,
  kNotString,
  kInvalidUtf8,
  kNulByte,
  kDamagedStream
};
constexpr int kBadRecordKinds = 7;
const char* bad_record_name(BadRecord reason);  // "bad_json", "missing_key", ...

struct Document {
  std::string text;
  std::string id;  // from ReadOptions::id_key (strings as they are, numbers as written); else ""
};

struct RecordVerdict {
  BadRecord reason = BadRecord::kNone;
  std::string message;  // "FILE:LINE: why", when reason != kNone
  bool ok() const { return reason == BadRecord::kNone; }
};

// Thread-safe (no shared state): workers call it on records a single reader produced.
RecordVerdict to_document(Record& record, InputFormat format, const ReadOptions& options,
                          const std::string& path, Document& out);

class DocumentReader {
 public:
  DocumentReader(std::string path, const ReadOptions& options)
      : options_(options), records_(std::move(path), options_) {}
  // The next document; false at the end. A bad record throws zaya::Error with its message.
  bool next(Document& document);
  const RecordReader& records() const { return records_; }

 private:
  ReadOptions options_;
  RecordReader records_;
  Record record_;
};

}  // namespace zaya
