#include "data/prepare_parts.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "data/checksum.h"
#include "data/kill_point.h"
#include "data/shard.h"

namespace zaya {

namespace {

constexpr char kPartMagic[8] = {'Z', 'A', 'Y', 'A', 'P', 'R', 'T', '3'};
constexpr char kPartEnd[8] = {'Z', 'A', 'Y', 'A', 'P', 'E', 'N', 'D'};

// The footer: every field 8 bytes (no padding), then the end magic. body_bytes counts the bytes
// between the leading magic and the footer, checksum is their WordHash (checksum.h: FNV-1a's
// byte-at-a-time loop cost the main thread as much as the shard's); token_bytes is the width of
// a stored token (2 when the vocabulary fits 16 bits, as in the shards, else 4).
struct PartFooter {
  int64_t format, compression, file_bytes, content_bytes;
  int64_t skipped[kBadRecordKinds];
  int64_t empty, too_short, documents, tokens, token_bytes;
  uint64_t checksum;
  int64_t body_bytes;
  char magic[8];
};
static_assert(sizeof(PartFooter) == (12 + kBadRecordKinds) * 8);

struct EntryHeader {
  uint64_t hash0, hash1, id_bytes, tokens;
};

bool read_footer(std::FILE* f, PartFooter& footer) {
  if (std::fseek(f, 0, SEEK_END) != 0) return false;
  const long size = std::ftell(f);
  const long least = long(sizeof kPartMagic + sizeof footer);
  if (size < least || std::fseek(f, size - long(sizeof footer), SEEK_SET) != 0) return false;
  if (std::fread(&footer, sizeof footer, 1, f) != 1) return false;
  char magic[8];
  if (std::memcmp(footer.magic, kPartEnd, 8) != 0 || footer.body_bytes != size - least ||
      std::fseek(f, 0, SEEK_SET) != 0 || std::fread(magic, 8, 1, f) != 1)
    return false;
  return std::memcmp(magic, kPartMagic, 8) == 0 &&
         (footer.token_bytes == 2 || footer.token_bytes == 4);
}

// The body's checksum against the footer's (f positioned after the leading magic).
bool body_matches(std::FILE* f, const PartFooter& footer) {
  std::vector<char> chunk(size_t(1) << 20);
  WordHash sum;
  for (int64_t left = footer.body_bytes; left > 0;) {
    const size_t want = size_t(std::min<int64_t>(left, int64_t(chunk.size())));
    if (std::fread(chunk.data(), 1, want, f) != want) return false;
    sum.add(chunk.data(), want);
    left -= int64_t(want);
  }
  return sum.value() == footer.checksum;
}

}  // namespace

std::string part_path(const std::string& work_dir, int index) {
  char name[32];
  std::snprintf(name, sizeof name, "%06d.part", index);
  return (std::filesystem::path(work_dir) / name).string();
}

PartWriter::PartWriter(std::string path, int64_t vocab_size)
    : path_(std::move(path)),
      tmp_(path_ + ".tmp"),
      narrow_(token_dtype_for_vocab(vocab_size) == TokenDtype::kU16) {
  file_ = std::fopen(tmp_.c_str(), "wb");
  ZAYA_CHECK(file_ != nullptr, tmp_, ": cannot create file: ", std::strerror(errno));
  std::setvbuf(file_, nullptr, _IOFBF, size_t(1) << 20);
  write(kPartMagic, sizeof kPartMagic);
  body_bytes_ = 0;
  hash_ = WordHash{};
}

PartWriter::~PartWriter() {
  if (file_ == nullptr) return;
  std::fclose(file_);
  std::remove(tmp_.c_str());
}

void PartWriter::write(const void* data, size_t bytes) {
  kill_point("part-write");
  ZAYA_CHECK(std::fwrite(data, 1, bytes, file_) == bytes, tmp_,
             ": write failed: ", std::strerror(errno));
  body_bytes_ += int64_t(bytes);
  hash_.add(data, bytes);
}

void PartWriter::add(const TokenizedDocument& d) {
  const EntryHeader h{d.text_hash[0], d.text_hash[1], d.id.size(), d.tokens.size()};
  write(&h, sizeof h);
  write(d.id.data(), d.id.size());
  if (narrow_) {
    narrowed_.assign(d.tokens.begin(), d.tokens.end());  // ids < vocab_size <= 65536
    write(narrowed_.data(), narrowed_.size() * sizeof(uint16_t));
  } else {
    write(d.tokens.data(), d.tokens.size() * sizeof(int32_t));
  }
  ++documents_;
  tokens_ += int64_t(d.tokens.size()) + 1;  // the eos each kept document gets
}

void PartWriter::commit(const FileReport& r) {
  PartFooter f{};
  f.format = int64_t(r.format);
  f.compression = int64_t(r.compression);
  f.file_bytes = r.file_bytes;
  f.content_bytes = r.content_bytes;
  for (int i = 0; i < kBadRecordKinds; ++i) f.skipped[i] = r.skipped[size_t(i)];
  f.empty = r.empty;
  f.too_short = r.too_short;
  f.documents = documents_;
  f.tokens = tokens_;
  f.token_bytes = narrow_ ? 2 : 4;
  f.checksum = hash_.value();
  f.body_bytes = body_bytes_;
  std::memcpy(f.magic, kPartEnd, 8);
  write(&f, sizeof f);
  // No fsync (it stalled the run on the disk): a kill -9 loses nothing the kernel holds, and
  // after a power loss a torn part fails the checksum part_is_complete verifies, so its file is
  // tokenized again. The shards, the outputs, are synced.
  ZAYA_CHECK(std::fflush(file_) == 0, tmp_, ": write failed: ", std::strerror(errno));
  const int closed = std::fclose(file_);
  file_ = nullptr;
  if (closed != 0) std::remove(tmp_.c_str());
  ZAYA_CHECK(closed == 0, tmp_, ": write failed: ", std::strerror(errno));
  kill_point("part-commit");
  ZAYA_CHECK(std::rename(tmp_.c_str(), path_.c_str()) == 0, path_,
             ": cannot rename the finished part into place: ", std::strerror(errno));
}

PartReader::PartReader(std::string path) : path_(std::move(path)) {
  file_ = std::fopen(path_.c_str(), "rb");
  ZAYA_CHECK(file_ != nullptr, path_, ": cannot open part: ", std::strerror(errno));
  std::setvbuf(file_, nullptr, _IOFBF, size_t(1) << 20);
  PartFooter f{};
  ZAYA_CHECK(read_footer(file_, f), path_,
             ": not a complete part file (run again without --resume to start over)");
  report_.format = InputFormat(f.format);
  report_.compression = Compression(f.compression);
  report_.file_bytes = f.file_bytes;
  report_.content_bytes = f.content_bytes;
  for (int i = 0; i < kBadRecordKinds; ++i) report_.skipped[size_t(i)] = f.skipped[i];
  report_.empty = f.empty;
  report_.too_short = f.too_short;
  report_.documents = f.documents;
  report_.tokens = f.tokens;
  token_bytes_ = f.token_bytes;
  left_ = f.documents;
}

PartReader::~PartReader() {
  if (file_ != nullptr) std::fclose(file_);
}

void PartReader::read(void* data, size_t bytes) {
  ZAYA_CHECK(std::fread(data, 1, bytes, file_) == bytes, path_, ": read failed or part too short");
}

bool PartReader::next(PartDocument& d) {
  if (left_ == 0) return false;
  --left_;
  EntryHeader h{};
  read(&h, sizeof h);
  d.text_hash[0] = h.hash0;
  d.text_hash[1] = h.hash1;
  d.id.resize(h.id_bytes);
  read(d.id.data(), d.id.size());
  d.tokens.resize(h.tokens);
  if (token_bytes_ == 4) {
    read(d.tokens.data(), d.tokens.size() * sizeof(int32_t));
    return true;
  }
  narrowed_.resize(h.tokens);
  read(narrowed_.data(), narrowed_.size() * sizeof(uint16_t));
  std::copy(narrowed_.begin(), narrowed_.end(), d.tokens.begin());
  return true;
}

bool part_is_complete(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  PartFooter footer{};
  const bool ok = read_footer(f, footer) && body_matches(f, footer);
  std::fclose(f);
  return ok;
}

PartSink::PartSink(const PrepareOptions& options, std::string work_dir,
                   std::vector<std::string> files, std::vector<int> indices, int64_t vocab_size)
    : options_(options),
      vocab_size_(vocab_size),
      work_dir_(std::move(work_dir)),
      files_(std::move(files)),
      indices_(std::move(indices)) {}

PartSink::~PartSink() = default;

void PartSink::refuse(const RecordVerdict& verdict) {
  if (!options_.skip_bad)
    ZAYA_FAIL(verdict.message, " (--skip-bad skips such input and counts it in index.json)");
  ++report_.skipped[size_t(verdict.reason)];
}

void PartSink::take(Batch& batch) {
  if (!batch.fatal.empty()) ZAYA_FAIL(batch.fatal);
  if (!writer_) {
    writer_ = std::make_unique<PartWriter>(part_path(work_dir_, indices_.at(size_t(batch.file))),
                                           vocab_size_);
    report_ = FileReport{};
    report_.path = files_.at(size_t(batch.file));
  }
  report_.format = batch.format;
  report_.compression = batch.compression;
  for (TokenizedDocument& d : batch.documents) {
    if (!d.verdict.ok()) {
      refuse(d.verdict);
    } else if (d.drop == DropReason::kEmpty) {
      ++report_.empty;
    } else if (d.drop == DropReason::kTooShort) {
      ++report_.too_short;
    } else {
      writer_->add(d);
      ++report_.documents;
      report_.tokens += int64_t(d.tokens.size()) + 1;
    }
  }
  if (!batch.stream_problem.ok()) refuse(batch.stream_problem);
  if (batch.stream_problem.ok() || options_.skip_bad) {
    report_.content_bytes = batch.content_bytes;
    report_.file_bytes = batch.file_bytes;
  }
  if (!batch.file_done) return;
  writer_->commit(report_);
  writer_.reset();
  documents_ += report_.documents;
  tokens_ += report_.tokens;
  file_bytes_done_ += report_.file_bytes;
  content_bytes_done_ += report_.content_bytes;
}

}  // namespace zaya
