// Generated tokens as text for a reader: decoded as they come, cut at the first stop string, and
// released only when settled — never the first bytes of a UTF-8 sequence whose rest has not come,
// nor text that might be the start of a stop string (it may yet be cut). `zaya generate` prints
// what push() releases; `zaya serve` sends it as stream events.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace zaya {

class TextStream {
 public:
  // `eos` (-1: none) ends the text without being part of it.
  TextStream(const Tokenizer& tok, std::vector<std::string> stop, int32_t eos = -1);

  // Adds a generated token; returns the text that became settled with it.
  std::string push(int32_t token);
  // The text not yet released (call once the generation has ended).
  std::string finish();

  bool stopped() const { return stopped_; }  // a stop string was reached
  const std::string& text() const { return text_; }
  // Tokens whose text is part of the result (the ones up to a stop string, without eos).
  size_t tokens() const { return ids_.size(); }

  // Where `text` stops: the first occurrence of a stop string (npos: none).
  static size_t stop_at(const std::string& text, const std::vector<std::string>& stop);
  // Bytes at the end of `text` that may still change: an incomplete UTF-8 sequence, or the start
  // of a stop string.
  static size_t unsettled_tail(const std::string& text, const std::vector<std::string>& stop);

 private:
  const Tokenizer& tok_;
  std::vector<std::string> stop_;
  int32_t eos_;
  std::vector<int32_t> ids_;
  std::string text_;
  size_t released_ = 0;
  bool stopped_ = false;
};

}  // namespace zaya
