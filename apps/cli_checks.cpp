#include "cli_checks.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "core/error.h"

namespace zaya::cli {

namespace fs = std::filesystem;

namespace {

bool is_type_max(int64_t hi) {
  return hi == std::numeric_limits<int32_t>::max() || hi == std::numeric_limits<int64_t>::max();
}

// "a positive integer", "an integer from 2 to 1000": the bound is named when it is not the
// type's, or when the value passed it.
std::string expected_integer(int64_t lo, int64_t hi, bool above) {
  if ((lo == 0 || lo == 1) && is_type_max(hi)) {
    const std::string kind = lo == 1 ? "a positive integer" : "a non-negative integer";
    return above ? kind + " up to " + std::to_string(hi) : kind;
  }
  return "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
}

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

// Parses the whole text as a finite real number.
bool parse_real(const std::string& text, double& v) {
  char* end = nullptr;
  v = std::strtod(text.c_str(), &end);
  return !text.empty() && end != text.c_str() && *end == '\0' && std::isfinite(v);
}

// What is at a path, for a message: "no such file or directory", "a directory", "a file".
std::string what_is_at(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return "nothing is there";
  if (fs::is_directory(st)) return "it is a directory";
  if (fs::is_regular_file(st)) return "it is a file";
  return "it is neither a file nor a directory";
}

// An output path's nearest existing ancestor must be a directory ('/dev/null/x' cannot be made).
std::string blocked_parent(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::path(path).parent_path();
  while (!p.empty() && !fs::exists(p, ec) && p != p.parent_path()) p = p.parent_path();
  if (p.empty() || fs::is_directory(p, ec)) return {};
  return " ('" + p.string() + "' is not a directory)";
}

}  // namespace

CLI::Validator IntIn(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        const char* s = text.c_str();
        size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
        bool digits = text.size() > i;
        for (size_t k = i; k < text.size(); ++k)
          digits = digits && text[k] >= '0' && text[k] <= '9';
        if (!digits) return "must be " + expected_integer(lo, hi, false) + ", got '" + text + "'";
        errno = 0;
        const long long v = std::strtoll(s, nullptr, 10);
        const bool overflow = errno == ERANGE;
        if (!overflow && v >= lo && v <= hi) return {};
        const bool above = overflow ? s[0] != '-' : v > hi;
        return "must be " + expected_integer(lo, hi, above) + ", got " + text;
      },
      "INT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

CLI::Validator Seed() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        bool digits = !text.empty() && text.size() <= 20;
        for (const char c : text) digits = digits && c >= '0' && c <= '9';
        errno = 0;
        if (digits) (void)std::strtoull(text.c_str(), nullptr, 10);
        if (digits && errno != ERANGE) return {};
        return "must be an integer from 0 to 18446744073709551615, got '" + text + "'";
      },
      "SEED");
}

CLI::Validator AtLeast(double lo, bool strict) {
  return CLI::Validator(
      [lo, strict](std::string& text) -> std::string {
        double v = 0;
        if (parse_real(text, v) && (strict ? v > lo : v >= lo)) return {};
        return "must be a number " + std::string(strict ? "> " : "≥ ") + number(lo) + ", got '" +
               text + "'";
      },
      strict ? "NUMBER > " + number(lo) : "NUMBER ≥ " + number(lo));
}

CLI::Validator RealIn(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        double v = 0;
        if (parse_real(text, v) && v >= lo && v <= hi) return {};
        return "must be a number from " + number(lo) + " to " + number(hi) + ", got '" + text + "'";
      },
      "NUMBER in [" + number(lo) + ", " + number(hi) + "]");
}

CLI::Validator ExistingFile() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        std::error_code ec;
        if (fs::is_regular_file(path, ec)) return {};
        return "must be an existing file, got '" + path + "' (" + what_is_at(path) + ")";
      },
      "FILE");
}

CLI::Validator ExistingDir() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        std::error_code ec;
        if (fs::is_directory(path, ec)) return {};
        return "must be an existing directory, got '" + path + "' (" + what_is_at(path) + ")";
      },
      "DIR");
}

CLI::Validator ExistingPath() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        std::error_code ec;
        if (fs::exists(path, ec)) return {};
        return "must be an existing file or directory, got '" + path + "' (nothing is there)";
      },
      "PATH");
}

CLI::Validator OutputDir() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        std::error_code ec;
        if (path.empty()) return "must be a directory to write into, got ''";
        // Existence first: under mpirun another rank may create the directory between two
        // checks, and a path only ever appears here as a directory (is_directory first would
        // see nothing, then exists() the new directory, and refuse it).
        if (!fs::exists(path, ec)) {
          const std::string blocked = blocked_parent(path);
          return blocked.empty()
                     ? ""
                     : "must be a directory to write into, got '" + path + "'" + blocked;
        }
        if (fs::is_directory(path, ec)) return {};
        return "must be a directory to write into, got '" + path + "' (" + what_is_at(path) + ")";
      },
      "DIR");
}

CLI::Validator OutputFile() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        std::error_code ec;
        if (path.empty()) return "must name a file to write, got ''";
        const std::string blocked = blocked_parent(path);
        if (!blocked.empty()) return "must name a file to write, got '" + path + "'" + blocked;
        if (!fs::is_directory(path, ec)) return {};
        return "must name a file to write, got '" + path + "' (" + what_is_at(path) + ")";
      },
      "FILE");
}

LmHeadChunks parse_lm_head_chunks(const std::string& text) {
  int t = 0, v = 0;
  char rest = 0;
  ZAYA_CHECK(std::sscanf(text.c_str(), "%d,%d%c", &t, &v, &rest) == 2 && t > 0 && v > 0,
             "--lm-head-chunks: expected TOKENS,VOCAB (two positive integers), got '", text, "'");
  return {t, v};
}

}  // namespace zaya::cli
