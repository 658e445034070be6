#include "data/shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "data/checksum.h"
#include "data/kill_point.h"

namespace zaya {

// Tokens and header fields are stored little-endian and read by plain loads.
static_assert(std::endian::native == std::endian::little, "shard I/O assumes a little-endian host");

namespace {

constexpr size_t kWriteBytes = size_t(1) << 20;  // ShardFileWriter's write size

// Header layout (byte offsets); the rest up to 64 bytes is zero padding.
constexpr size_t kOffMagic = 0, kOffVersion = 8, kOffDtype = 12, kOffCount = 16, kOffVocab = 24,
                 kOffChecksum = 32, kOffPadding = 40;

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename T>
void store(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

void write_all(int fd, const void* data, size_t bytes, const std::string& path) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    ZAYA_CHECK(n > 0, path, ": write failed: ", std::strerror(errno));
    p += n;
    bytes -= size_t(n);
  }
}

}  // namespace

TokenDtype token_dtype_for_vocab(int64_t vocab_size) {
  ZAYA_CHECK(vocab_size > 0 && vocab_size <= (int64_t(1) << 31),
             "vocab size must be in [1, 2^31], got ", vocab_size);
  return vocab_size <= 65536 ? TokenDtype::kU16 : TokenDtype::kU32;
}

const char* token_dtype_name(TokenDtype dtype) {
  return dtype == TokenDtype::kU16 ? "u16" : "u32";
}

ShardFileWriter::ShardFileWriter(std::string path, int64_t vocab_size) : tmp_(path + ".tmp") {
  info_.path = std::move(path);
  info_.vocab_size = vocab_size;
  info_.dtype = token_dtype_for_vocab(vocab_size);
  info_.checksum = kFnv1a64Offset;
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ZAYA_CHECK(fd_ >= 0, tmp_, ": cannot create shard file: ", std::strerror(errno));
  // The header's place, filled in by finish() once the count and checksum are known.
  const uint8_t zeros[kShardHeaderBytes] = {};
  write_or_discard(zeros, sizeof zeros);
}

ShardFileWriter::~ShardFileWriter() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(tmp_.c_str());  // unfinished: never leave a shard-looking file behind
}

void ShardFileWriter::write_or_discard(const void* data, size_t bytes) {
  try {
    write_all(fd_, data, bytes, tmp_);
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    ::unlink(tmp_.c_str());
    throw;
  }
}

// Appends are buffered (one write per kWriteBytes, not one per document); the checksum runs over
// each append as it comes, so the bytes and the checksum are those of unbuffered writes.
void ShardFileWriter::append(std::span<const int32_t> tokens) {
  kill_point("shard-write");
  // Checked first, in a loop without branches (vectorised), then converted: the two loops cost
  // less than one that checks and stores token by token.
  const auto limit = uint32_t(info_.vocab_size);
  bool any_bad = false;
  for (const int32_t t : tokens) any_bad |= uint32_t(t) >= limit;
  if (any_bad) {
    const auto bad =
        std::find_if(tokens.begin(), tokens.end(), [&](int32_t t) { return uint32_t(t) >= limit; });
    ZAYA_FAIL(info_.path, ": token ", info_.tokens + (bad - tokens.begin()), " has id ", *bad,
              ", expected an id in [0, ", info_.vocab_size, ")");
  }
  const size_t width = size_t(info_.dtype), old = body_.size();
  body_.resize(old + tokens.size() * width);
  uint8_t* out = body_.data() + old;
  if (info_.dtype == TokenDtype::kU16) {
    for (size_t i = 0; i < tokens.size(); ++i) store(out + i * 2, uint16_t(tokens[i]));
  } else {
    std::memcpy(out, tokens.data(), tokens.size() * 4);  // little-endian: the bytes as they are
  }
  info_.checksum = fnv1a64(out, body_.size() - old, info_.checksum);
  info_.tokens += int64_t(tokens.size());
  if (body_.size() >= kWriteBytes) flush();
}

void ShardFileWriter::flush() {
  write_or_discard(body_.data(), body_.size());
  body_.clear();
}

ShardInfo ShardFileWriter::finish() {
  uint8_t header[kShardHeaderBytes] = {};
  std::memcpy(header + kOffMagic, kShardMagic, sizeof kShardMagic);
  store(header + kOffVersion, kShardVersion);
  store(header + kOffDtype, uint32_t(info_.dtype));
  store(header + kOffCount, uint64_t(info_.tokens));
  store(header + kOffVocab, uint64_t(info_.vocab_size));
  store(header + kOffChecksum, info_.checksum);
  flush();
  ZAYA_CHECK(::lseek(fd_, 0, SEEK_SET) == 0, tmp_, ": seek failed: ", std::strerror(errno));
  write_or_discard(header, sizeof header);
  ZAYA_CHECK(::fsync(fd_) == 0, tmp_, ": fsync failed: ", std::strerror(errno));
  ::close(fd_);
  fd_ = -1;
  kill_point("shard-commit");
  // Renamed only now: readers never see a half-written shard.
  ZAYA_CHECK(::rename(tmp_.c_str(), info_.path.c_str()) == 0, info_.path,
             ": cannot rename the temporary shard into place: ", std::strerror(errno));
  return info_;
}

ShardInfo write_shard(const std::string& path, std::span<const int32_t> tokens,
                      int64_t vocab_size) {
  ShardFileWriter writer(path, vocab_size);
  writer.append(tokens);
  return writer.finish();
}

ShardReader::ShardReader(const std::string& path, bool verify_checksum) {
  info_.path = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ZAYA_CHECK(fd >= 0, path, ": cannot open shard: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    ZAYA_FAIL(path, ": cannot stat shard: ", std::strerror(errno));
  }
  const size_t file_bytes = size_t(st.st_size);
  if (file_bytes < kShardHeaderBytes) {
    ::close(fd);
    ZAYA_FAIL(path, ": field 'header' truncated: file has ", file_bytes,
              " bytes, expected at least ", kShardHeaderBytes, " (a ZAYATOK1 shard header)");
  }
  void* m = ::mmap(nullptr, file_bytes, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);  // the mapping stays valid after close
  ZAYA_CHECK(m != MAP_FAILED, path, ": mmap failed: ", std::strerror(errno));
  map_ = static_cast<const uint8_t*>(m);
  map_bytes_ = file_bytes;

  // From here on the destructor will not run if we throw, so unmap before every failure.
  try {
    const uint8_t* h = map_;
    ZAYA_CHECK(std::memcmp(h + kOffMagic, kShardMagic, sizeof kShardMagic) == 0, path,
               ": field 'magic' is not \"ZAYATOK1\" (not a zaya token shard)");
    const uint32_t version = load<uint32_t>(h + kOffVersion);
    ZAYA_CHECK(version == kShardVersion, path, ": field 'version' is ", version, ", expected ",
               kShardVersion);
    const uint32_t dtype = load<uint32_t>(h + kOffDtype);
    ZAYA_CHECK(dtype == uint32_t(TokenDtype::kU16) || dtype == uint32_t(TokenDtype::kU32), path,
               ": field 'dtype' is ", dtype, ", expected 2 (u16) or 4 (u32)");
    info_.dtype = TokenDtype(dtype);
    const uint64_t count = load<uint64_t>(h + kOffCount);
    const uint64_t vocab = load<uint64_t>(h + kOffVocab);
    ZAYA_CHECK(vocab > 0 && vocab <= (uint64_t(1) << 31), path, ": field 'vocab_size' is ", vocab,
               ", expected a value in [1, 2^31]");
    ZAYA_CHECK(info_.dtype == token_dtype_for_vocab(int64_t(vocab)), path, ": field 'dtype' is ",
               token_dtype_name(info_.dtype), " but vocab_size ", vocab, " calls for ",
               token_dtype_name(token_dtype_for_vocab(int64_t(vocab))));
    for (size_t i = kOffPadding; i < kShardHeaderBytes; ++i)
      ZAYA_CHECK(h[i] == 0, path, ": field 'padding' byte ", i, " is nonzero, expected zero");
    const uint64_t width = dtype;
    ZAYA_CHECK(count <= (file_bytes - kShardHeaderBytes) / width &&
                   kShardHeaderBytes + count * width == file_bytes,
               path, ": field 'token_count' says ", count, " tokens (", kShardHeaderBytes, " + ",
               count, " x ", width, " bytes) but the file has ", file_bytes,
               " bytes (truncated or trailing data)");
    info_.tokens = int64_t(count);
    info_.vocab_size = int64_t(vocab);
    info_.checksum = load<uint64_t>(h + kOffChecksum);

    if (verify_checksum) {
      const uint8_t* body = map_ + kShardHeaderBytes;
      const uint64_t actual = fnv1a64(body, count * width);
      ZAYA_CHECK(actual == info_.checksum, path, ": field 'checksum' is ",
                 checksum_hex(info_.checksum), " but the token bytes hash to ",
                 checksum_hex(actual), " (FNV-1a 64): the shard is damaged");
      for (int64_t i = 0; i < info_.tokens; ++i) {
        const int32_t t = at(i);
        ZAYA_CHECK(t < info_.vocab_size, path, ": token ", i, " has id ", t,
                   ", expected an id below vocab_size ", info_.vocab_size);
      }
    }
  } catch (...) {
    unmap();
    throw;
  }
}

ShardReader::~ShardReader() {
  unmap();
}

ShardReader::ShardReader(ShardReader&& other) noexcept
    : info_(std::move(other.info_)), map_(other.map_), map_bytes_(other.map_bytes_) {
  other.map_ = nullptr;
  other.map_bytes_ = 0;
}

ShardReader& ShardReader::operator=(ShardReader&& other) noexcept {
  if (this != &other) {
    unmap();
    info_ = std::move(other.info_);
    map_ = other.map_;
    map_bytes_ = other.map_bytes_;
    other.map_ = nullptr;
    other.map_bytes_ = 0;
  }
  return *this;
}

void ShardReader::unmap() {
  if (map_) ::munmap(const_cast<uint8_t*>(map_), map_bytes_);
  map_ = nullptr;
  map_bytes_ = 0;
}

int32_t ShardReader::at(int64_t i) const {
  const uint8_t* body = map_ + kShardHeaderBytes;
  if (info_.dtype == TokenDtype::kU16) return int32_t(load<uint16_t>(body + size_t(i) * 2));
  return int32_t(load<uint32_t>(body + size_t(i) * 4));
}

void ShardReader::read(int64_t begin, std::span<int32_t> out) const {
  const int64_t n = int64_t(out.size());
  ZAYA_CHECK(begin >= 0 && begin + n <= info_.tokens, info_.path, ": read of tokens [", begin, ", ",
             begin + n, ") is outside the shard's ", info_.tokens, " tokens");
  for (int64_t i = 0; i < n; ++i) out[size_t(i)] = at(begin + i);
}

}  // namespace zaya
