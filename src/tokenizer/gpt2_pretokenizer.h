// GPT-2's pre-tokenisation, the pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// written out by hand over UTF-8 bytes (no regex engine): alternatives are tried in order at each
// position, as a backtracking regex engine does. Bytes that are not valid UTF-8 count as
// [^\s\p{L}\p{N}], so every byte string splits into words that concatenate back to it.
#pragma once

#include <cstddef>
#include <string_view>

#include "tokenizer/unicode_class.h"

namespace zaya {

class Gpt2WordSplitter {
 public:
  explicit Gpt2WordSplitter(std::string_view text) : text_(text), ascii_(ascii_classes()) {}

  // Sets `word` to the next word and returns true, or returns false at the end of the text.
  bool next(std::string_view& word);

 private:
  struct Unit {
    CharClass cls;
    uint32_t code_point;  // kNoCodePoint for an invalid byte
    uint8_t length;
  };
  static constexpr uint32_t kNoCodePoint = 0xFFFFFFFF;

  Unit unit_at(size_t pos) const;
  // End of the run of units of class `cls` starting at `pos`; `last_start` gets the start of the
  // run's last unit.
  size_t run_end(size_t pos, CharClass cls, size_t* last_start = nullptr) const;
  size_t contraction_end(size_t pos) const;  // 0 when no contraction starts at pos

  std::string_view text_;
  const CharClass* ascii_;  // ASCII is most text: its class is one load, without decoding
  size_t pos_ = 0;
};

}  // namespace zaya
