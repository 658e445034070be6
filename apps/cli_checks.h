// One validation for every number and path on the command line. Each check is a CLI11 validator
// whose message says what was expected and what was given; CLI11 prefixes the flag, so a user
// reads e.g. "--windows: must be a positive integer, got 0". CLI11's own number validators print
// their bounds to 300 digits and its conversions name no range; none of them is used in apps/.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>

#include <CLI/CLI.hpp>

#include "backend/op_types.h"

namespace zaya::cli {

// A whole number in [lo, hi] (decimal digits with an optional sign; nothing else).
CLI::Validator IntIn(int64_t lo, int64_t hi);
// A whole number ≥ 1 (≥ 0) that the option's type T holds.
template <class T = int>
CLI::Validator PositiveInt(int64_t hi = int64_t(std::numeric_limits<T>::max())) {
  return IntIn(1, hi);
}
template <class T = int>
CLI::Validator NonNegativeInt(int64_t hi = int64_t(std::numeric_limits<T>::max())) {
  return IntIn(0, hi);
}
// A seed: a whole number from 0 to 2^64 - 1 (CLI11 alone wraps -1 around to 2^64 - 1).
CLI::Validator Seed();
// A finite real number ≥ lo (> lo when strict), or in [lo, hi]. NaN and infinities never pass.
CLI::Validator AtLeast(double lo, bool strict = false);
CLI::Validator RealIn(double lo, double hi);
inline CLI::Validator NonNegative() {
  return AtLeast(0.0);
}
inline CLI::Validator Positive() {
  return AtLeast(0.0, true);
}

// A flag whose value names a mode (`names`: each name and its mode, e.g. precision_names(), a
// map that outlives the parse): parsed once, here, into the mode. Another word is an error naming
// the flag and listing the names ("--precision: 'fp16' is not one of auto, bf16, fp32").
template <class Mode>
CLI::Option* add_mode_option(CLI::App& app, const std::string& flag, Mode& mode,
                             const std::map<std::string, Mode>& names, const std::string& help) {
  std::string listed, shown;
  for (const auto& [name, value] : names) {
    listed += (listed.empty() ? "" : ", ") + name;
    if (value == mode) shown = name;
  }
  const CLI::Validator known(
      [&names, listed](std::string& text) {
        return names.count(text) ? std::string() : "'" + text + "' is not one of " + listed;
      },
      "{" + listed + "}", "");
  return app
      .add_option_function<std::string>(
          flag, [&mode, &names](const std::string& text) { mode = names.at(text); }, help)
      ->check(known)
      ->default_str(shown);
}

// --lm-head-chunks TOKENS,VOCAB: two positive integers; throws zaya::Error naming the flag.
LmHeadChunks parse_lm_head_chunks(const std::string& text);

// Paths. An input that must exist as a regular file (a directory or nothing there is named), an
// input directory, and outputs: a directory that is not a file, a file that is not a directory
// (each may be absent; whether its parent can be written is found when it is written).
CLI::Validator ExistingFile();
CLI::Validator ExistingDir();
CLI::Validator ExistingPath();
CLI::Validator OutputDir();
CLI::Validator OutputFile();

}  // namespace zaya::cli
