#pragma once

#include "commands.h"

namespace zaya::cli {

// zaya sample: text from a model (the short form of zaya generate).
Runner add_sample_command(CLI::App& app);

}  // namespace zaya::cli
