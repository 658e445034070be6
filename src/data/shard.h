// Token shards: a 64-byte header followed by little-endian token ids (see docs/data-format.md).
// Writers are atomic (temp file + rename), so a shard that exists is complete; readers mmap the
// file and validate every header field, the file size and (unless skipped) the checksum.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace zaya {

constexpr char kShardMagic[8] = {'Z', 'A', 'Y', 'A', 'T', 'O', 'K', '1'};
constexpr uint32_t kShardVersion = 1;
constexpr size_t kShardHeaderBytes = 64;

// The token dtype code is the byte width of one token.
enum class TokenDtype : uint32_t { kU16 = 2, kU32 = 4 };

// u16 when every id fits (vocab <= 65536), else u32.
TokenDtype token_dtype_for_vocab(int64_t vocab_size);
const char* token_dtype_name(TokenDtype dtype);

struct ShardInfo {
  std::string path;
  int64_t tokens = 0;
  int64_t vocab_size = 0;
  TokenDtype dtype = TokenDtype::kU16;
  uint64_t checksum = 0;  // FNV-1a 64 of the token bytes as stored
};

// Writes `tokens` (each in [0, vocab_size)) to `path` atomically: path + ".tmp", fsync, rename.
ShardInfo write_shard(const std::string& path, std::span<const int32_t> tokens, int64_t vocab_size);

// A shard written as its tokens arrive (memory: about 1 MB plus one append's bytes, whatever the
// shard's size):
// path + ".tmp" gets a placeholder header, the tokens, then on finish() the real header (count and
// checksum), fsync and the rename to `path`. Destroyed unfinished (an error), it removes the
// temporary file, so no partial shard is left.
class ShardFileWriter {
 public:
  ShardFileWriter(std::string path, int64_t vocab_size);
  ~ShardFileWriter();
  ShardFileWriter(const ShardFileWriter&) = delete;
  ShardFileWriter& operator=(const ShardFileWriter&) = delete;

  void append(std::span<const int32_t> tokens);  // each id must be in [0, vocab_size)
  int64_t tokens() const { return info_.tokens; }
  ShardInfo finish();

 private:
  void write_or_discard(const void* data, size_t bytes);  // on failure: closes and unlinks
  void flush();                                           // writes body_ and empties it

  std::string tmp_;
  int fd_ = -1;
  ShardInfo info_;
  std::vector<uint8_t> body_;  // encoded bytes not yet written
};

// A read-only memory map of one shard. Move-only; unmaps on destruction.
class ShardReader {
 public:
  // Validates magic, version, dtype, padding and file size; with `verify_checksum` it also
  // recomputes the checksum and checks every id < vocab_size (one pass over the tokens).
  explicit ShardReader(const std::string& path, bool verify_checksum = true);
  ~ShardReader();
  ShardReader(ShardReader&& other) noexcept;
  ShardReader& operator=(ShardReader&& other) noexcept;
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;

  const ShardInfo& info() const { return info_; }
  int64_t size() const { return info_.tokens; }
  int32_t at(int64_t i) const;
  // Copies tokens [begin, begin + out.size()) into out as int32.
  void read(int64_t begin, std::span<int32_t> out) const;

 private:
  void unmap();
  ShardInfo info_;
  const uint8_t* map_ = nullptr;
  size_t map_bytes_ = 0;
};

}  // namespace zaya
