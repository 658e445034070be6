// Reading Hugging Face tokenizer.json files: small helpers shared by the byte-level and the
// SentencePiece-style loaders. Errors name the file and the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace zaya {

std::string read_tokenizer_file(const std::string& path);  // the whole file, any bytes
nlohmann::json parse_json_file(const std::string& path);

// j["type"] when it is a string, else "?" (for error messages).
std::string json_type_of(const nlohmann::json& j);

// A boolean field with a default when absent or null; `where` names the object in errors.
bool json_flag(const nlohmann::json& j, const char* key, bool fallback, const std::string& where);

// j[key] of an object, or null when j is not an object or lacks key. nlohmann's const operator[]
// on a missing key is undefined behaviour (it dereferences the map's end), found by fuzzing.
const nlohmann::json& json_member_or_null(const nlohmann::json& j, const char* key);

// A pattern of the form {"String": "text"}: the literal text. Regex patterns are an error naming
// `where` (zaya has no regex engine for them).
std::string json_string_pattern(const nlohmann::json& pattern, const std::string& where);

// One entry of "added_tokens".
struct AddedTokenEntry {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool normalized = false, lstrip = false, rstrip = false, single_word = false;
};

// The "added_tokens" array of a tokenizer.json (empty when absent or null); ids are checked to be
// in [0, 2^24) and contents to be non-empty.
std::vector<AddedTokenEntry> parse_added_tokens(const nlohmann::json& j, const std::string& path);

}  // namespace zaya
