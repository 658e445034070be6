#pragma once

#include "commands.h"

namespace zaya::cli {

// zaya size (shapes and training plans for a hardware profile) and zaya size profile.
Runner add_size_commands(CLI::App& app);

}  // namespace zaya::cli
