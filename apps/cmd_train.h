#pragma once

#include "commands.h"

namespace zaya::cli {

// zaya train, zaya plot, zaya sample.
Runner add_train_commands(CLI::App& app);

}  // namespace zaya::cli
