// `zaya tokenizer train|encode|decode`: byte-level BPE tokenizers (see src/tokenizer/).
#pragma once

#include "commands.h"

namespace zaya::cli {

Runner add_tokenizer_commands(CLI::App& app);

}  // namespace zaya::cli
