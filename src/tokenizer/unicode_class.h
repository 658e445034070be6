// Character classes of the GPT-2 pre-tokenisation pattern and a strict UTF-8 decoder that never
// fails: a byte that does not start a well-formed sequence becomes a one-byte "invalid" unit of
// class kOther, so any byte string splits into units that cover it exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace zaya {

enum class CharClass : uint8_t { kOther, kLetter, kNumber, kSpace };

// \p{L}, \p{N}, ECMAScript \s, or none of them. Tables: scripts/gen_unicode_tables.py.
CharClass classify_code_point(uint32_t cp);
// classify_code_point of each ASCII code point, as a table a hot loop can keep at hand.
const CharClass* ascii_classes();

// Unicode version of the generated tables.
const char* unicode_table_version();

struct Utf8Unit {
  uint32_t code_point;  // meaningless when invalid
  uint8_t length;       // bytes consumed, 1..4
  bool invalid;         // a lone byte outside any well-formed sequence
};

// Decodes the unit at text[pos] (pos < text.size()). Rejects overlong forms, surrogates and code
// points above U+10FFFF, as the UTF-8 definition requires.
Utf8Unit decode_utf8_unit(std::string_view text, size_t pos);

namespace unicode_detail {
struct ClassRange {
  uint32_t first, last;
  CharClass cls;
};
extern const char* const kTableUnicodeVersion;
extern const int kClassRangeCount;
extern const ClassRange kClassRanges[];
}  // namespace unicode_detail

}  // namespace zaya
