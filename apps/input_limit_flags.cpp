#include "input_limit_flags.h"

#include <string>

#include "cli_checks.h"

namespace zaya::cli {

void add_max_record_bytes_flag(CLI::App& app, int64_t& bytes, const char* what) {
  app.add_option("--max-record-bytes", bytes,
                 std::string("the longest ") + what +
                     " read, in bytes; a longer one is an error naming its file and line, found "
                     "before more of it is held in memory")
      ->check(PositiveInt<int64_t>())
      ->capture_default_str();
}

void add_max_decompression_ratio_flag(CLI::App& app, double& ratio) {
  app.add_option("--max-decompression-ratio", ratio,
                 "a .gz or .zst input that expands past this many times the compressed bytes "
                 "read (checked past its first 16 MiB) is refused as a likely decompression "
                 "bomb; 0: no limit")
      ->check(NonNegative())
      ->capture_default_str();
}

}  // namespace zaya::cli
