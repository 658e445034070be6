#include "data/checksum.h"

#include <bit>
#include <cstdio>
#include <cstring>

namespace zaya {

uint64_t fnv1a64(const void* data, size_t bytes, uint64_t state) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    state ^= p[i];
    state *= kFnv1a64Prime;
  }
  return state;
}

static_assert(std::endian::native == std::endian::little, "WordHash reads words little-endian");

namespace {

uint64_t word_step(uint64_t state, uint64_t word) {
  return std::rotl((state ^ word) * kFnv1a64Prime, 31);
}

}  // namespace

void WordHash::add(const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  bytes_ += bytes;
  while (bytes > 0 && pending_bytes_ > 0) {  // complete the word an earlier call began
    pending_ |= uint64_t(*p++) << (8 * pending_bytes_);
    --bytes;
    if (++pending_bytes_ == 8) {
      state_ = word_step(state_, pending_);
      pending_ = 0;
      pending_bytes_ = 0;
    }
  }
  for (; bytes >= 8; bytes -= 8, p += 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    state_ = word_step(state_, word);
  }
  for (size_t i = 0; i < bytes; ++i) pending_ |= uint64_t(p[i]) << (8 * pending_bytes_++);
}

uint64_t WordHash::value() const {
  const uint64_t state = pending_bytes_ > 0 ? word_step(state_, pending_) : state_;
  return word_step(state, bytes_);
}

std::string checksum_hex(uint64_t checksum) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(checksum));
  return buf;
}

}  // namespace zaya
