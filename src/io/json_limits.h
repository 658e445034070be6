// A depth limit for every JSON a user hands zaya (configs, task files, --prompts lines, request
// bodies of zaya serve, tokenizer.json, data lines). nlohmann::json builds any depth, but copying,
// comparing, dumping and destroying a value recurse once per level: a line of 100,000 '[' would
// overflow the stack. The text is scanned first, so nothing that deep is ever built.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace zaya {

// Far deeper than any config, task or request nests, far shallower than the stack allows.
constexpr int kMaxJsonDepth = 512;

struct TextPosition {
  int64_t line = 1;    // 1-based
  int64_t column = 1;  // 1-based byte in the line
};

// Where `text` first opens an array or object more than max_depth levels deep; nullopt when it
// never does. Brackets inside strings do not count. On text that is not JSON the depth found is
// at least what a JSON parser reaches before it stops, so a text that passes is safe to parse.
std::optional<TextPosition> json_too_deep(std::string_view text, int max_depth = kMaxJsonDepth);

// "nested more than 512 levels deep (at line 1, column 513); expected at most 512 levels of
// arrays and objects", or "" when the text is shallow enough: for callers that report in their
// own way (zaya serve's 400 responses).
std::string json_depth_problem(std::string_view text, int max_depth = kMaxJsonDepth);

// Throws zaya::Error "WHERE: JSON " + json_depth_problem(...) when the text nests too deeply.
void check_json_depth(std::string_view text, const std::string& where,
                      int max_depth = kMaxJsonDepth);

// check_json_depth, then nlohmann::json::parse; a parse error becomes zaya::Error naming `where`.
nlohmann::json parse_json_checked(std::string_view text, const std::string& where);

}  // namespace zaya
