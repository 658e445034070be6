#pragma once

#include "commands.h"

namespace zaya::cli {

// zaya train: a training run from a config's model, data and train sections.
Runner add_train_command(CLI::App& app);

}  // namespace zaya::cli
