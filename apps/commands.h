// Command families of the zaya binary. Each apps/cmd_*.cpp registers its subcommands on the root
// CLI::App and returns a runner; after parsing, zaya.cpp calls the runners in turn: a runner
// returns kNotMine when none of its subcommands was chosen, else the process exit code. Runners may
// throw zaya::Error; zaya.cpp prints it and exits 1.
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

#include "cli_checks.h"

namespace zaya::cli {

constexpr int kNotMine = -1;
using Runner = std::function<int()>;

}  // namespace zaya::cli
