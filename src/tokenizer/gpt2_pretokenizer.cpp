#include "tokenizer/gpt2_pretokenizer.h"

namespace zaya {

Gpt2WordSplitter::Unit Gpt2WordSplitter::unit_at(size_t pos) const {
  const uint8_t b = static_cast<uint8_t>(text_[pos]);
  if (b < 0x80) return {ascii_[b], b, 1};
  const Utf8Unit u = decode_utf8_unit(text_, pos);
  if (u.invalid) return {CharClass::kOther, kNoCodePoint, 1};
  return {classify_code_point(u.code_point), u.code_point, u.length};
}

size_t Gpt2WordSplitter::run_end(size_t pos, CharClass cls, size_t* last_start) const {
  size_t last = pos;
  while (pos < text_.size()) {
    const uint8_t b = static_cast<uint8_t>(text_[pos]);
    if (b < 0x80) {
      if (ascii_[b] != cls) break;
      last = pos++;
      continue;
    }
    const Unit u = unit_at(pos);
    if (u.cls != cls) break;
    last = pos;
    pos += u.length;
  }
  if (last_start) *last_start = last;
  return pos;
}

size_t Gpt2WordSplitter::contraction_end(size_t pos) const {
  // The pattern's contractions are ASCII and case-sensitive, in this order.
  static constexpr std::string_view kSuffixes[] = {"s", "t", "re", "ve", "m", "ll", "d"};
  const std::string_view rest = text_.substr(pos + 1);
  for (const std::string_view s : kSuffixes) {
    if (rest.starts_with(s)) return pos + 1 + s.size();
  }
  return 0;
}

bool Gpt2WordSplitter::next(std::string_view& word) {
  const size_t start = pos_;
  if (start >= text_.size()) return false;
  const Unit first = unit_at(start);
  size_t end = 0;
  if (first.code_point == '\'') end = contraction_end(start);
  if (end == 0 && first.code_point == ' ' && start + 1 < text_.size()) {
    // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+" with their optional leading space.
    const Unit second = unit_at(start + 1);
    if (second.cls != CharClass::kSpace) end = run_end(start + 1, second.cls);
  }
  if (end == 0 && first.cls != CharClass::kSpace) end = run_end(start, first.cls);
  if (end == 0) {
    // "\s+(?!\S)": the whitespace run, less its last unit when a non-space follows, so that the
    // last space can lead the next word; "\s+" takes a lone whitespace unit before a non-space.
    size_t last_start = start;
    end = run_end(start, CharClass::kSpace, &last_start);
    if (end < text_.size() && last_start > start) end = last_start;
  }
  word = text_.substr(start, end - start);
  pos_ = end;
  return true;
}

}  // namespace zaya
