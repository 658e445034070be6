#pragma once

#include "commands.h"

namespace zaya::cli {

// zaya bench gemm and zaya bench membw: registered on the existing `bench` subcommand group.
Runner add_hwbench_commands(CLI::App& bench);

}  // namespace zaya::cli
