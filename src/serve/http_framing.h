// The framing of an HTTP/1.1 request head, checked before anything reads a body (http_server.h):
// one plain decimal Content-Length (no sign, at most 19 digits, repeated only with the same
// value) within the body limit, no chunked request body, a request line and `name: value` header
// lines. A pure function of the bytes, fuzzed (fuzz/http_framing.cpp).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace zaya::serve {

// The framing of one request head (request line and headers, up to and including the blank line).
struct Framing {
  int status = 0;         // 0: fine; otherwise the HTTP status to answer with
  std::string message;    // why, for the error object
  size_t body_bytes = 0;  // Content-Length (0 when absent)
  bool expect_continue = false;
};
Framing check_framing(std::string_view head, size_t max_body_bytes);

}  // namespace zaya::serve
