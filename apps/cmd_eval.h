#pragma once

#include "commands.h"

namespace zaya::cli {

// zaya eval: the validation loss of a model on a config's held-out windows at any length, over
// ranks (data parallel and, with --context-parallel, each window spread over several ranks).
Runner add_eval_commands(CLI::App& app);

}  // namespace zaya::cli
