#pragma once

#include "commands.h"

namespace zaya::cli {

// zaya serve: an OpenAI-compatible completions server (src/serve/).
Runner add_serve_commands(CLI::App& app);

}  // namespace zaya::cli
