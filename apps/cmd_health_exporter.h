#pragma once

#include "commands.h"

namespace zaya::cli {

// zaya health-exporter --gpu nvml[:PATH] [--host H] [--port P]: this machine's GPU health at
// /metrics for the supervisor on another host (zaya aegis --node-exporter HOST=URL).
Runner add_health_exporter_command(CLI::App& app);

}  // namespace zaya::cli
