#include "tokenizer/hf_json.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "io/json_limits.h"

namespace zaya {

std::string read_tokenizer_file(const std::string& path) {
  ZAYA_CHECK(std::filesystem::is_regular_file(path), path,
             ": no such file (expected a tokenizer file)");
  std::ifstream in(path, std::ios::binary);
  ZAYA_CHECK(in, path, ": cannot open for reading");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::json parse_json_file(const std::string& path) {
  return parse_json_checked(read_tokenizer_file(path), path);
}

std::string json_type_of(const nlohmann::json& j) {
  return j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>()
                                                                      : std::string("?");
}

bool json_flag(const nlohmann::json& j, const char* key, bool fallback, const std::string& where) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return fallback;
  ZAYA_CHECK(j[key].is_boolean(), where, ".", key, " must be true or false");
  return j[key].get<bool>();
}

const nlohmann::json& json_member_or_null(const nlohmann::json& j, const char* key) {
  static const nlohmann::json null_value;
  if (!j.is_object()) return null_value;
  const auto it = j.find(key);
  return it == j.end() ? null_value : *it;
}

std::string json_string_pattern(const nlohmann::json& pattern, const std::string& where) {
  ZAYA_CHECK(pattern.is_object() && (pattern.contains("String") || pattern.contains("Regex")),
             where, " must be {\"String\": ...} or {\"Regex\": ...}");
  ZAYA_CHECK(!pattern.contains("Regex"), where,
             ": Regex patterns are not supported (zaya supports {\"String\": ...} patterns)");
  ZAYA_CHECK(pattern["String"].is_string() && !pattern["String"].get<std::string>().empty(), where,
             ".String must be a non-empty string");
  return pattern["String"].get<std::string>();
}

std::vector<AddedTokenEntry> parse_added_tokens(const nlohmann::json& j, const std::string& path) {
  std::vector<AddedTokenEntry> out;
  if (!j.contains("added_tokens") || j["added_tokens"].is_null()) return out;
  const nlohmann::json& added = j["added_tokens"];
  ZAYA_CHECK(added.is_array(), path, ": added_tokens must be an array");
  for (size_t i = 0; i < added.size(); ++i) {
    const nlohmann::json& t = added[i];
    const std::string where = str_cat(path, ": added_tokens[", i, "]");
    ZAYA_CHECK(t.is_object() && t.contains("id") && t["id"].is_number_integer() &&
                   t.contains("content") && t["content"].is_string(),
               where, " needs an integer \"id\" and a string \"content\"");
    const int64_t id = t["id"].get<int64_t>();
    ZAYA_CHECK(id >= 0 && id < (int64_t(1) << 24), where, ".id ", id, " is out of range");
    AddedTokenEntry e;
    e.id = int32_t(id);
    e.content = t["content"].get<std::string>();
    ZAYA_CHECK(!e.content.empty(), where, ".content is empty");
    e.special = json_flag(t, "special", false, where);
    e.normalized = json_flag(t, "normalized", false, where);
    e.lstrip = json_flag(t, "lstrip", false, where);
    e.rstrip = json_flag(t, "rstrip", false, where);
    e.single_word = json_flag(t, "single_word", false, where);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace zaya
