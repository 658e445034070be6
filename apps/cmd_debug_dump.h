#pragma once

#include "commands.h"

namespace zaya::cli {

// zaya debug-dump: a random model and its outputs on random tokens, for an independent check.
Runner add_debug_dump_command(CLI::App& app);

}  // namespace zaya::cli
