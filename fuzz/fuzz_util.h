// Shared by the libFuzzer targets: most zaya parsers take a path, not bytes, so each input is
// written to a scratch file of this process (unique by pid, so parallel fuzzers do not collide).
// zaya::Error is the parsers' answer to bad input; anything else that escapes is a finding.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "core/error.h"

namespace zaya::fuzz {

// A directory of this process under TMPDIR (or /tmp), created on first use.
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    const std::filesystem::path d = std::filesystem::path(tmp && *tmp ? tmp : "/tmp") /
                                    ("zaya-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d.string();
  }();
  return dir;
}

// Writes the bytes to scratch_dir()/name and returns the path.
inline std::string write_input(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = scratch_dir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  out.close();
  if (!out) {  // a full /tmp would make every input look like "cannot open": stop instead
    std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
  return path;
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace zaya::fuzz

// Runs the statement(s); a zaya::Error is the expected outcome of bad input. Other exceptions
// escape to libFuzzer, which reports them as a crash (uncaught exception -> abort). Variadic so
// that a braced body may contain commas.
#define ZAYA_FUZZ_EXPECT_ERRORS(...) \
  do {                               \
    try {                            \
      __VA_ARGS__;                   \
    } catch (const ::zaya::Error&) { \
    }                                \
  } while (0)
