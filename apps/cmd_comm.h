#pragma once

#include "commands.h"

namespace zaya::cli {

// zaya bench comm and zaya bench ckpt: registered on the existing `bench` subcommand group.
Runner add_comm_commands(CLI::App& bench);

}  // namespace zaya::cli
