#pragma once

#include "commands.h"

namespace zaya::cli {

// zaya info: parameter counts, FLOPs per token, KV-cache size and the memory plan per GPU.
Runner add_info_command(CLI::App& app);

}  // namespace zaya::cli
