// `zaya data ...`: preparing token shards from text.
#pragma once

#include "commands.h"

namespace zaya::cli {

Runner add_data_commands(CLI::App& app);

}  // namespace zaya::cli
