#pragma once

#include "commands.h"

namespace zaya::cli {

// zaya bench step: forward+backward (and optimizer) tokens/s of a model on random tokens.
Runner add_step_bench_command(CLI::App& bench);

}  // namespace zaya::cli
