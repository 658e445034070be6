#include "infer/text_stream.h"

#include <algorithm>

namespace zaya {

TextStream::TextStream(const Tokenizer& tok, std::vector<std::string> stop, int32_t eos)
    : tok_(tok), stop_(std::move(stop)), eos_(eos) {}

size_t TextStream::stop_at(const std::string& text, const std::vector<std::string>& stop) {
  size_t at = std::string::npos;
  for (const std::string& s : stop)
    if (!s.empty()) at = std::min(at, text.find(s));
  return at;
}

size_t TextStream::unsettled_tail(const std::string& text, const std::vector<std::string>& stop) {
  size_t hold = 0;
  for (size_t back = 1; back <= std::min<size_t>(3, text.size()); ++back) {
    const unsigned char ch = static_cast<unsigned char>(text[text.size() - back]);
    if ((ch & 0xC0) == 0x80) continue;  // continuation byte: look further back
    const size_t need = ch >= 0xF0 ? 4 : ch >= 0xE0 ? 3 : ch >= 0xC0 ? 2 : 1;
    if (need > back) hold = back;
    break;
  }
  for (const std::string& s : stop)
    for (size_t n = std::min(s.size() - (s.empty() ? 0 : 1), text.size()); n > hold; --n)
      if (text.compare(text.size() - n, n, s, 0, n) == 0) {
        hold = n;
        break;
      }
  return hold;
}

std::string TextStream::push(int32_t token) {
  if (stopped_ || token == eos_) return {};
  ids_.push_back(token);
  // Decoding the whole list (not token by token): byte-level tokens may split a character.
  text_ = tok_.decode(ids_);
  const size_t at = stop_at(text_, stop_);
  if (at != std::string::npos) {
    text_.resize(at);
    stopped_ = true;
  }
  const size_t settled = stopped_ ? text_.size() : text_.size() - unsettled_tail(text_, stop_);
  if (settled <= released_) return {};
  std::string out = text_.substr(released_, settled - released_);
  released_ = settled;
  return out;
}

std::string TextStream::finish() {
  if (released_ >= text_.size()) return {};
  std::string out = text_.substr(released_);
  released_ = text_.size();
  return out;
}

}  // namespace zaya
