#pragma once

#include "commands.h"

namespace zaya::cli {

// zaya bench decode: decoding tokens/s per batch size against the memory-bandwidth bound.
Runner add_decode_bench_command(CLI::App& bench);

}  // namespace zaya::cli
