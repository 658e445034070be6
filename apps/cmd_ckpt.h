#pragma once

#include "commands.h"

namespace zaya::cli {

// zaya ckpt inspect / export-hf / import-hf.
Runner add_ckpt_commands(CLI::App& app);

}  // namespace zaya::cli
