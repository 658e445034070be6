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

// "0x" followed by 16 lower-case hex digits (index.json stores checksums as strings because JSON
// numbers lose precision above 2^53 in many readers).
std::string checksum_hex(uint64_t checksum);

}  // namespace zaya
