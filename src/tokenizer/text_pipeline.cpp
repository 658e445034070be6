#include "tokenizer/text_pipeline.h"

#include "core/error.h"
#include "tokenizer/hf_json.h"

namespace zaya {
namespace {

using nlohmann::json;

// "<0xNN>" with two hex digits -> NN, else -1.
int byte_token_value(std::string_view token) {
  if (token.size() != 6 || !token.starts_with("<0x") || token[5] != '>') return -1;
  int value = 0;
  for (const char c : token.substr(3, 2)) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else {
      return -1;
    }
    value = value * 16 + digit;
  }
  return value;
}

const json& sequence_items(const json& j, const char* key, const std::string& where) {
  ZAYA_CHECK(j.contains(key) && j[key].is_array(), where, ".", key, " must be an array");
  return j[key];
}

std::string string_field(const json& j, const char* key, const std::string& where) {
  ZAYA_CHECK(j.contains(key) && j[key].is_string(), where, ".", key, " must be a string");
  return j[key].get<std::string>();
}

}  // namespace

std::string replace_all(std::string_view text, std::string_view pattern, std::string_view content) {
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  size_t from = 0;
  for (size_t hit; (hit = text.find(pattern, from)) != std::string_view::npos;) {
    out.append(text.substr(from, hit - from)).append(content);
    from = hit + pattern.size();
  }
  out.append(text.substr(from));
  return out;
}

Normalizer Normalizer::from_json(const json& j, const std::string& where) {
  Normalizer n;
  if (!j.is_null()) n.add(j, where);
  return n;
}

void Normalizer::add(const json& j, const std::string& where) {
  const std::string type = json_type_of(j);
  if (type == "Sequence") {
    const json& items = sequence_items(j, "normalizers", where);
    for (size_t i = 0; i < items.size(); ++i)
      add(items[i], str_cat(where, ".normalizers[", i, "]"));
  } else if (type == "Replace") {
    steps_.push_back({false,
                      json_string_pattern(json_member_or_null(j, "pattern"), where + ".pattern"),
                      string_field(j, "content", where)});
  } else if (type == "Prepend") {
    steps_.push_back({true, "", string_field(j, "prepend", where)});
  } else {
    ZAYA_FAIL(
        where, " \"", type,
        "\" is not supported (zaya supports Replace with a String pattern, Prepend, Sequence)");
  }
}

std::string Normalizer::apply(std::string_view text) const {
  std::string out(text);
  for (const Step& s : steps_) {
    // Prepend leaves empty text empty, as in Hugging Face.
    out =
        s.prepend ? (out.empty() ? out : s.content + out) : replace_all(out, s.pattern, s.content);
  }
  return out;
}

PreTokenizer PreTokenizer::from_json(const json& j, const std::string& where) {
  PreTokenizer p;
  if (j.is_null()) return p;
  ZAYA_CHECK(json_type_of(j) == "Split", where, " \"", json_type_of(j),
             "\" is not supported (zaya supports null or Split for SentencePiece-style BPE)");
  p.delimiter_ = json_string_pattern(json_member_or_null(j, "pattern"), where + ".pattern");
  ZAYA_CHECK(!json_flag(j, "invert", false, where), where,
             ".invert true is not supported (expected false)");
  const std::string behavior = string_field(j, "behavior", where);
  if (behavior == "Removed") {
    p.behavior_ = Behavior::kRemoved;
  } else if (behavior == "Isolated") {
    p.behavior_ = Behavior::kIsolated;
  } else if (behavior == "MergedWithPrevious") {
    p.behavior_ = Behavior::kMergedWithPrevious;
  } else if (behavior == "MergedWithNext") {
    p.behavior_ = Behavior::kMergedWithNext;
  } else {
    ZAYA_FAIL(where, ".behavior \"", behavior,
              "\" is not supported (expected Removed, Isolated, MergedWithPrevious or "
              "MergedWithNext)");
  }
  return p;
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& words) const {
  const auto emit = [&](size_t begin, size_t end) {
    if (end > begin) words.push_back(text.substr(begin, end - begin));
  };
  if (delimiter_.empty()) return emit(0, text.size());
  size_t word_begin = 0, from = 0;
  for (size_t hit; (hit = text.find(delimiter_, from)) != std::string_view::npos;) {
    const size_t after = hit + delimiter_.size();
    switch (behavior_) {
      case Behavior::kRemoved:
        emit(word_begin, hit), word_begin = after;
        break;
      case Behavior::kIsolated:
        emit(word_begin, hit), emit(hit, after), word_begin = after;
        break;
      case Behavior::kMergedWithPrevious:
        emit(word_begin, after), word_begin = after;
        break;
      case Behavior::kMergedWithNext:
        emit(word_begin, hit), word_begin = hit;
        break;
    }
    from = after;
  }
  emit(word_begin, text.size());
}

TokenDecoder TokenDecoder::from_json(const json& j, const std::string& where) {
  TokenDecoder d;
  if (!j.is_null()) d.add(j, where);
  return d;
}

void TokenDecoder::add(const json& j, const std::string& where) {
  const std::string type = json_type_of(j);
  if (type == "Sequence") {
    const json& items = sequence_items(j, "decoders", where);
    for (size_t i = 0; i < items.size(); ++i) add(items[i], str_cat(where, ".decoders[", i, "]"));
  } else if (type == "Replace") {
    steps_.push_back({Step::kReplace,
                      json_string_pattern(json_member_or_null(j, "pattern"), where + ".pattern"),
                      string_field(j, "content", where)});
  } else if (type == "ByteFallback") {
    steps_.push_back({Step::kByteFallback, "", ""});
  } else if (type == "Fuse") {
    steps_.push_back({Step::kFuse, "", ""});
  } else {
    ZAYA_FAIL(where, " \"", type,
              "\" is not supported (zaya supports Replace with a String pattern, ByteFallback, "
              "Fuse, Sequence)");
  }
}

std::string TokenDecoder::decode(std::vector<std::string> tokens) const {
  for (const Step& s : steps_) {
    switch (s.kind) {
      case Step::kReplace:
        for (std::string& t : tokens) t = replace_all(t, s.pattern, s.content);
        break;
      case Step::kByteFallback:
        for (std::string& t : tokens)
          if (const int byte = byte_token_value(t); byte >= 0) t = std::string(1, char(byte));
        break;
      case Step::kFuse: {
        std::string all;
        for (const std::string& t : tokens) all += t;
        tokens.assign(1, std::move(all));
        break;
      }
    }
  }
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

}  // namespace zaya
