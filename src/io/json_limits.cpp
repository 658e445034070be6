#include "io/json_limits.h"

#include <algorithm>

#include "core/error.h"

namespace zaya {

namespace {

TextPosition position_of(std::string_view text, size_t pos) {
  const std::string_view before = text.substr(0, pos);
  const size_t last_newline = before.rfind('\n');
  return {1 + std::count(before.begin(), before.end(), '\n'),
          int64_t(last_newline == std::string_view::npos ? pos + 1 : pos - last_newline)};
}

}  // namespace

std::optional<TextPosition> json_too_deep(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // an escaped character never ends the string
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return position_of(text, i);
    } else if (c == ']' || c == '}') {
      depth = std::max(0, depth - 1);
    }
  }
  return std::nullopt;
}

std::string json_depth_problem(std::string_view text, int max_depth) {
  const std::optional<TextPosition> at = json_too_deep(text, max_depth);
  if (!at) return {};
  // A one-line text (a JSON line, a request body) is named by its caller's FILE:LINE already.
  const std::string where = text.find('\n') == std::string_view::npos
                                ? str_cat("column ", at->column)
                                : str_cat("line ", at->line, ", column ", at->column);
  return str_cat("nested more than ", max_depth, " levels deep (at ", where, "); expected at most ",
                 max_depth, " levels of arrays and objects");
}

void check_json_depth(std::string_view text, const std::string& where, int max_depth) {
  const std::string problem = json_depth_problem(text, max_depth);
  ZAYA_CHECK(problem.empty(), where, ": JSON ", problem);
}

nlohmann::json parse_json_checked(std::string_view text, const std::string& where) {
  check_json_depth(text, where);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    ZAYA_FAIL(where, ": malformed JSON: ", e.what());
  }
}

}  // namespace zaya
