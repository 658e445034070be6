#pragma once

#include "commands.h"

namespace zaya::cli {

// zaya generate: streamed text from a model with the CCA-cache decoder.
Runner add_generate_commands(CLI::App& app);

}  // namespace zaya::cli
