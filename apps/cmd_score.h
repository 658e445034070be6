#pragma once

#include "commands.h"

namespace zaya::cli {

// zaya score: logits, per-token log-probabilities, loss and (optionally) gradients of a model on
// given tokens or text.
Runner add_score_commands(CLI::App& app);

}  // namespace zaya::cli
