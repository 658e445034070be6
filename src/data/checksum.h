// FNV-1a 64-bit (Fowler, Noll, Vo; offset basis 0xcbf29ce484222325, prime 0x100000001b3), the
// checksum of shard token bytes. Chosen because the specification fits in two constants, so any
// reader in any language can verify a shard; it detects truncation and flipped bytes, which is
// all a shard checksum is for (it is not a cryptographic hash).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace zaya {

constexpr uint64_t kFnv1a64Offset = 0xcbf29ce484222325ull;
constexpr uint64_t kFnv1a64Prime = 0x100000001b3ull;

// Streaming: pass the previous result as `state` to continue a hash over several buffers.
uint64_t fnv1a64(const void* data, size_t bytes, uint64_t state = kFnv1a64Offset);

// A checksum of internal files (the parts of `zaya data prepare`), eight bytes per step instead
// of FNV-1a's one: each 8-byte little-endian word w does state = rotl((state ^ w) * prime, 31),
// and the last 1-7 bytes, zero-padded to a word, one more step, then the byte count is mixed in.
// Every step is a bijection of the state, so a change confined to one word is always detected.
// The result does not depend on how the bytes were cut into add() calls.
class WordHash {
 public:
  void add(const void* data, size_t bytes);
  uint64_t value() const;

 private:
  uint64_t state_ = kFnv1a64Offset, pending_ = 0, bytes_ = 0;
  unsigned pending_bytes_ = 0;
};

// "0x" followed by 16 lower-case hex digits (index.json stores checksums as strings because JSON
// numbers lose precision above 2^53 in many readers).
std::string checksum_hex(uint64_t checksum);

}  // namespace zaya
