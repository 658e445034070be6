// Errors a user can act on. Every failure in zaya raises zaya::Error whose message says what was
// wrong and what was expected, and ends with the source location that detected it.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace zaya {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void throw_error(const char* file, int line, const std::string& message);

template <typename... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

}  // namespace zaya

// ZAYA_CHECK(cond, "what was expected", values...): throws zaya::Error naming file:line.
#define ZAYA_CHECK(cond, ...)                                                           \
  do {                                                                                  \
    if (!(cond)) ::zaya::throw_error(__FILE__, __LINE__, ::zaya::str_cat(__VA_ARGS__)); \
  } while (0)

#define ZAYA_FAIL(...) ::zaya::throw_error(__FILE__, __LINE__, ::zaya::str_cat(__VA_ARGS__))
