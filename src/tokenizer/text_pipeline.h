// The text steps of a Hugging Face tokenizer.json around a SentencePiece-style BPE model: the
// normalizer (before the model), the pre-tokenizer (splits normalised text into words) and the
// decoder (token texts back to text). Only what such files use is supported; anything else is an
// error naming the file and field.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace zaya {

// null, Replace {"String": a} -> b, Prepend, or a Sequence of them. Gemma-3: Replace " " -> "▁".
class Normalizer {
 public:
  static Normalizer from_json(const nlohmann::json& j, const std::string& where);
  std::string apply(std::string_view text) const;
  bool is_identity() const { return steps_.empty(); }

 private:
  struct Step {
    bool prepend;         // false: replace every `pattern` by `content`
    std::string pattern;  // unused for prepend
    std::string content;
  };
  void add(const nlohmann::json& j, const std::string& where);
  std::vector<Step> steps_;
};

// null, or Split on a literal {"String": ...} pattern with invert false and the behaviour Removed,
// Isolated, MergedWithPrevious or MergedWithNext (Hugging Face's meanings). Gemma-3 splits on " ",
// which its normalizer has already replaced, so no split happens there.
class PreTokenizer {
 public:
  static PreTokenizer from_json(const nlohmann::json& j, const std::string& where);
  // Appends the words of `text` (views into it, none empty) to `words`.
  void split(std::string_view text, std::vector<std::string_view>& words) const;

 private:
  enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext };
  std::string delimiter_;  // empty: no split
  Behavior behavior_ = Behavior::kIsolated;
};

// null, Replace {"String": a} -> b, ByteFallback, Fuse, or a Sequence of them, applied to the list
// of token texts in order. Gemma-3: Replace "▁" -> " ", ByteFallback, Fuse. ByteFallback turns
// "<0xNN>" into the raw byte NN: zaya keeps bytes that are not UTF-8 (Hugging Face and
// transformers.js put U+FFFD there), so byte-fallback encodings decode to the exact input bytes.
class TokenDecoder {
 public:
  static TokenDecoder from_json(const nlohmann::json& j, const std::string& where);
  std::string decode(std::vector<std::string> tokens) const;

 private:
  struct Step {
    enum Kind { kReplace, kByteFallback, kFuse } kind;
    std::string pattern, content;  // kReplace
  };
  void add(const nlohmann::json& j, const std::string& where);
  std::vector<Step> steps_;
};

// Replaces every non-overlapping occurrence of `pattern` (non-empty), left to right.
std::string replace_all(std::string_view text, std::string_view pattern, std::string_view content);

}  // namespace zaya
