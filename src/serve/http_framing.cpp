#include "serve/http_framing.h"

#include <algorithm>
#include <cctype>

namespace zaya::serve {

namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

}  // namespace

Framing check_framing(std::string_view head, size_t max_body_bytes) {
  Framing f;
  const auto fail = [&](int status, std::string message) {
    f.status = status;
    f.message = std::move(message);
    return f;
  };
  bool have_length = false, chunked = false;
  size_t start = head.find('\n');
  if (start == std::string_view::npos || trim(head.substr(0, start)).empty())
    return fail(400, "malformed request line");
  for (++start; start < head.size();) {
    size_t end = head.find('\n', start);
    if (end == std::string_view::npos) end = head.size();
    const std::string_view line = trim(head.substr(start, end - start));
    start = end + 1;
    if (line.empty()) break;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0)
      return fail(400, "malformed header line (no 'name: value')");
    const std::string_view name = line.substr(0, colon), value = trim(line.substr(colon + 1));
    if (iequals(name, "Content-Length")) {
      const bool digits =
          !value.empty() && value.size() <= 19 &&
          std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (!digits)
        return fail(400, "Content-Length must be a non-negative decimal integer, got '" +
                             std::string(value.substr(0, 40)) + "'");
      const size_t n = std::stoull(std::string(value));
      if (have_length && n != f.body_bytes) return fail(400, "conflicting Content-Length headers");
      have_length = true;
      f.body_bytes = n;
    } else if (iequals(name, "Transfer-Encoding")) {
      chunked = true;
    } else if (iequals(name, "Expect") && iequals(value, "100-continue")) {
      f.expect_continue = true;
    }
  }
  if (chunked && have_length) return fail(400, "both Transfer-Encoding and Content-Length");
  if (chunked)
    return fail(411,
                "send the request body with a Content-Length (chunked request bodies are "
                "not accepted)");
  if (f.body_bytes > max_body_bytes)
    return fail(413, "the request body is too large: Content-Length " +
                         std::to_string(f.body_bytes) + ", at most " +
                         std::to_string(max_body_bytes) + " bytes");
  return f;
}

}  // namespace zaya::serve
