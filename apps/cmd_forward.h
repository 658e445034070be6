#pragma once

#include "commands.h"

namespace zaya::cli {

// zaya forward: a model's mean next-token loss on a token sequence.
Runner add_forward_command(CLI::App& app);

}  // namespace zaya::cli
