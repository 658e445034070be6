#pragma once

#include "commands.h"

namespace zaya::cli {

// zaya aegis [options] -- CMD... ; zaya aegis status RUN_DIR.
Runner add_aegis_commands(CLI::App& app);

}  // namespace zaya::cli
