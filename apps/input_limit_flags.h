// The flags that bound what a command reads, worded alike on every command that has them:
// --max-record-bytes (data prepare, tokenizer train, generate --prompts, eval --tasks) and
// --max-decompression-ratio (the commands that read .gz and .zst inputs).
#pragma once

#include <cstdint>

#include <CLI/CLI.hpp>

namespace zaya::cli {

// `what` names the record: "line or document", "line".
void add_max_record_bytes_flag(CLI::App& app, int64_t& bytes, const char* what);
void add_max_decompression_ratio_flag(CLI::App& app, double& ratio);

}  // namespace zaya::cli
