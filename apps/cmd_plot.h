#pragma once

#include "commands.h"

namespace zaya::cli {

// zaya plot: a run's loss curve as SVG.
Runner add_plot_command(CLI::App& app);

}  // namespace zaya::cli
