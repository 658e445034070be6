// Command families of the zaya binary. Each apps/cmd_*.cpp registers its subcommands on the root
// CLI::App and returns a runner; after parsing, zaya.cpp calls the runners in turn: a runner
// returns kNotMine when none of its subcommands was chosen, else the process exit code. Runners may
// throw zaya::Error; zaya.cpp prints it and exits 1.
#pragma once

#include <cmath>
#include <functional>
#include <string>

#include <CLI/CLI.hpp>

namespace zaya::cli {

constexpr int kNotMine = -1;
using Runner = std::function<int()>;

// Number checks whose messages read well (CLI11's own print the range's bounds to 300 digits).
// NaN and infinities never pass.
inline CLI::Validator AtLeast(double lo, bool strict = false) {
  return CLI::Validator(
      [lo, strict](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        const bool ok =
            end != text.c_str() && *end == '\0' && std::isfinite(v) && (strict ? v > lo : v >= lo);
        if (ok) return {};
        char bound[32];
        std::snprintf(bound, sizeof bound, "%g", lo);
        return "'" + text + "' is not a number " + (strict ? "> " : "≥ ") + bound;
      },
      strict ? "NUMBER > 0" : "NUMBER ≥ 0");
}
inline CLI::Validator NonNegative() {
  return AtLeast(0.0);
}
inline CLI::Validator Positive() {
  return AtLeast(0.0, true);
}

}  // namespace zaya::cli
