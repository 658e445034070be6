#include "data/checksum.h"

#include <cstdio>

namespace zaya {

uint64_t fnv1a64(const void* data, size_t bytes, uint64_t state) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    state ^= p[i];
    state *= kFnv1a64Prime;
  }
  return state;
}

std::string checksum_hex(uint64_t checksum) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(checksum));
  return buf;
}

}  // namespace zaya
