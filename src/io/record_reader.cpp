#include "io/record_reader.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"

namespace zaya {

namespace {

constexpr size_t kReadChunk = size_t(1) << 20;

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// The format a file's name declares, looking through a compression suffix; kAuto when it says
// nothing.
InputFormat format_from_name(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  for (const char* c : {".gz", ".zst", ".zstd"})
    if (name.ends_with(c)) name.erase(name.size() - std::string_view(c).size());
  for (const char* j : {".jsonl", ".json", ".ndjson"})
    if (name.ends_with(j)) return InputFormat::kJsonl;
  for (const char* t : {".txt", ".text", ".md"})
    if (name.ends_with(t)) return InputFormat::kText;
  return InputFormat::kAuto;
}

// A .gz or .zst name on content that is not gzip or zstd is a mistake worth stopping for.
void check_name_matches(const std::string& path, Compression found) {
  const bool says_gzip = path.ends_with(".gz");
  const bool says_zstd = path.ends_with(".zst") || path.ends_with(".zstd");
  ZAYA_CHECK(!says_gzip || found == Compression::kGzip, path,
             ": named .gz but its content is not gzip (it does not start with 1f 8b)");
  ZAYA_CHECK(!says_zstd || found == Compression::kZstd, path,
             ": named .zst but its content is not zstd (it does not start with 28 b5 2f fd)");
}

}  // namespace

const char* input_format_name(InputFormat f) {
  switch (f) {
    case InputFormat::kText:
      return "text";
    case InputFormat::kJsonl:
      return "jsonl";
    case InputFormat::kAuto:
      break;
  }
  return "auto";
}

RecordReader::RecordReader(std::string path, const ReadOptions& options)
    : path_(std::move(path)),
      separator_(options.doc_separator),
      max_record_bytes_(size_t(options.max_record_bytes)) {
  ZAYA_CHECK(!separator_.empty(), "--doc-separator must not be empty");
  ZAYA_CHECK(options.max_record_bytes > 0, "--max-record-bytes ", options.max_record_bytes,
             ": expected a positive number of bytes");
  stream_ = open_byte_stream(path_, &compression_, options.stream);
  check_name_matches(path_, compression_);
  format_ = options.format == InputFormat::kAuto ? format_from_name(path_) : options.format;
  if (format_ != InputFormat::kAuto) return;
  // By content: read until the first non-blank byte (or the end) and look at it.
  size_t first = 0;
  while (true) {
    while (first < buffer_.size() && is_space(buffer_[first])) ++first;
    if (first < buffer_.size() || !fill()) break;
  }
  format_ =
      first < buffer_.size() && buffer_[first] == '{' ? InputFormat::kJsonl : InputFormat::kText;
}

bool RecordReader::fill() {
  if (at_end_) return false;
  if (begin_ > 0) {  // drop consumed bytes so the buffer holds one chunk plus a partial record
    buffer_.erase(0, begin_);
    scan_from_ -= std::min(scan_from_, begin_);
    begin_ = 0;
  }
  const size_t old = buffer_.size();
  buffer_.resize(old + kReadChunk);
  size_t got = 0;
  try {
    got = stream_->read({buffer_.data() + old, kReadChunk});
  } catch (...) {
    buffer_.resize(old);
    at_end_ = true;
    throw;
  }
  buffer_.resize(old + got);
  at_end_ = got == 0;
  return got > 0;
}

void RecordReader::consume(size_t bytes) {
  advance(bytes,
          std::count(buffer_.begin() + long(begin_), buffer_.begin() + long(begin_ + bytes), '\n'));
}

void RecordReader::advance(size_t bytes, int64_t newlines) {
  line_ += newlines;
  offset_ += int64_t(bytes);
  begin_ += bytes;
  scan_from_ = std::max(scan_from_, begin_);
}

void RecordReader::check_length(size_t end) const {
  if (end - begin_ <= max_record_bytes_) return;
  const bool lines = format_ == InputFormat::kJsonl;
  ZAYA_FAIL(path_, ":", line_, ": ", lines ? "a line" : "a document", " longer than the limit of ",
            max_record_bytes_, " bytes (at least ", end - begin_,
            " bytes); raise --max-record-bytes to read it");
}

bool RecordReader::next(Record& record) {
  return format_ == InputFormat::kJsonl ? next_line(record) : next_text_document(record);
}

bool RecordReader::next_line(Record& record) {
  while (true) {
    const size_t nl = buffer_.find('\n', scan_from_);
    // Checked per line or chunk read, never per byte; before the buffer grows past the limit.
    check_length(nl == std::string::npos ? buffer_.size() : nl);
    if (nl == std::string::npos) scan_from_ = buffer_.size();  // a long line: scan each byte once
    const bool last = nl == std::string::npos && !fill();
    if (nl == std::string::npos && !last) continue;
    if (last && begin_ == buffer_.size()) return false;
    const size_t end = nl == std::string::npos ? buffer_.size() : nl;
    const std::string_view line(buffer_.data() + begin_, end - begin_);
    const bool blank = std::all_of(line.begin(), line.end(), is_space);
    if (!blank) {
      record.bytes.assign(line);
      record.line = line_;
      record.offset = offset_;
    }
    // The line holds no '\n' (it ends at the first): only its own line end to count.
    const bool newline = nl != std::string::npos;
    advance(end - begin_ + newline, newline);
    if (!blank) return true;
  }
}

bool RecordReader::next_text_document(Record& record) {
  while (true) {
    size_t sep = buffer_.find(separator_, scan_from_);
    check_length(sep == std::string::npos ? buffer_.size() : sep);
    if (sep == std::string::npos) {
      // The separator may straddle the next chunk: rescan its possible start.
      scan_from_ =
          std::max(begin_, buffer_.size() - std::min(buffer_.size(), separator_.size() - 1));
      if (fill()) continue;
      if (begin_ == buffer_.size()) return false;
    }
    const size_t end = sep == std::string::npos ? buffer_.size() : sep;
    size_t first = begin_, stop = end;
    while (first < stop && is_space(buffer_[first])) ++first;
    while (stop > first && is_space(buffer_[stop - 1])) --stop;
    if (first < stop) {
      consume(first - begin_);
      record.bytes.assign(buffer_, first, stop - first);
      record.line = line_;
      record.offset = offset_;
    }
    consume(end - begin_ + (sep == std::string::npos ? 0 : separator_.size()));
    if (first < stop) return true;
  }
}

}  // namespace zaya
