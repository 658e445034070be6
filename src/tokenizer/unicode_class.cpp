#include "tokenizer/unicode_class.h"

#include <algorithm>
#include <array>

namespace zaya {
namespace {

// ASCII is most text: classify it with one table lookup instead of a binary search.
std::array<CharClass, 128> make_ascii_classes() {
  std::array<CharClass, 128> t{};
  for (uint32_t c = 0; c < 128; ++c) {
    const auto* end = unicode_detail::kClassRanges + unicode_detail::kClassRangeCount;
    const auto* it = std::find_if(unicode_detail::kClassRanges, end,
                                  [c](const unicode_detail::ClassRange& r) { return r.last >= c; });
    t[c] = (it != end && it->first <= c) ? it->cls : CharClass::kOther;
  }
  return t;
}

}  // namespace

const CharClass* ascii_classes() {
  static const std::array<CharClass, 128> ascii = make_ascii_classes();
  return ascii.data();
}

CharClass classify_code_point(uint32_t cp) {
  if (cp < 128) return ascii_classes()[cp];
  const auto* begin = unicode_detail::kClassRanges;
  const auto* end = begin + unicode_detail::kClassRangeCount;
  const auto* it = std::lower_bound(
      begin, end, cp, [](const unicode_detail::ClassRange& r, uint32_t v) { return r.last < v; });
  return (it != end && it->first <= cp) ? it->cls : CharClass::kOther;
}

const char* unicode_table_version() {
  return unicode_detail::kTableUnicodeVersion;
}

Utf8Unit decode_utf8_unit(std::string_view text, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t b0 = byte(pos);
  if (b0 < 0x80) return {b0, 1, false};
  const Utf8Unit invalid{b0, 1, true};
  int len;
  uint32_t cp, min_cp;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, cp = b0 & 0x1F, min_cp = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, cp = b0 & 0x0F, min_cp = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, cp = b0 & 0x07, min_cp = 0x10000;
  } else {
    return invalid;  // a continuation byte or 0xF8..0xFF
  }
  if (pos + len > text.size()) return invalid;
  for (int i = 1; i < len; ++i) {
    const uint8_t b = byte(pos + i);
    if ((b & 0xC0) != 0x80) return invalid;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return invalid;
  return {cp, static_cast<uint8_t>(len), false};
}

}  // namespace zaya
