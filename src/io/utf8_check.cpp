#include "io/utf8_check.h"

#include <cstdint>
#include <string>

namespace zaya {

namespace {

// Length of the valid sequence starting at s[i], or 0 when it is not one.
size_t sequence_length(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return uint8_t(s[i + k]); };
  const uint8_t b0 = byte(0);
  size_t len = 0;
  uint8_t lo = 0x80, hi = 0xbf;  // the allowed range of the second byte
  if (b0 < 0x80) return 1;
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    len = 2;
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    len = 3;
    if (b0 == 0xe0) lo = 0xa0;  // overlong
    if (b0 == 0xed) hi = 0x9f;  // surrogates
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    len = 4;
    if (b0 == 0xf0) lo = 0x90;  // overlong
    if (b0 == 0xf4) hi = 0x8f;  // above U+10FFFF
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  if (byte(1) < lo || byte(1) > hi) return 0;
  for (size_t k = 2; k < len; ++k)
    if ((byte(k) & 0xc0) != 0x80) return 0;
  return len;
}

}  // namespace

size_t first_invalid_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    // ASCII runs, the bulk of most corpora, eight bytes at a time.
    while (i + 8 <= text.size()) {
      uint64_t word;
      __builtin_memcpy(&word, text.data() + i, 8);
      if (word & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= text.size()) break;
    const size_t len = sequence_length(text, i);
    if (len == 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

size_t utf8_length(std::string_view text) {
  size_t n = 0;
  for (const char c : text) n += (uint8_t(c) & 0xc0) != 0x80;
  return n;
}

}  // namespace zaya
