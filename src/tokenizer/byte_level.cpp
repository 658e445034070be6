#include "tokenizer/byte_level.h"

#include <array>
#include <cstdint>
#include <unordered_map>

#include "tokenizer/unicode_class.h"

namespace zaya {
namespace {

struct ByteLevelAlphabet {
  std::array<std::string, 256> byte_to_text;
  std::unordered_map<uint32_t, uint8_t> code_point_to_byte;
};

void append_utf8(uint32_t cp, std::string& out) {
  // The alphabet lies below U+0200: one or two bytes.
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

const ByteLevelAlphabet& alphabet() {
  static const ByteLevelAlphabet a = [] {
    ByteLevelAlphabet r;
    const auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    uint32_t next_extra = 256;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cp = printable(b) ? uint32_t(b) : next_extra++;
      append_utf8(cp, r.byte_to_text[b]);
      r.code_point_to_byte[cp] = uint8_t(b);
    }
    return r;
  }();
  return a;
}

}  // namespace

std::string bytes_to_byte_level(std::string_view bytes) {
  const ByteLevelAlphabet& a = alphabet();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) out += a.byte_to_text[static_cast<uint8_t>(c)];
  return out;
}

std::optional<std::string> byte_level_to_bytes(std::string_view text) {
  const ByteLevelAlphabet& a = alphabet();
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Unit u = decode_utf8_unit(text, pos);
    if (u.invalid) return std::nullopt;
    const auto it = a.code_point_to_byte.find(u.code_point);
    if (it == a.code_point_to_byte.end()) return std::nullopt;
    out += static_cast<char>(it->second);
    pos += u.length;
  }
  return out;
}

}  // namespace zaya
