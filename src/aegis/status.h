// `zaya aegis status RUN_DIR`: a summary of a supervised run from OUT/aegis/state.json,
// OUT/aegis/events.jsonl and OUT/skip_windows.json: outcome, restarts, faults and how long each
// took to recover from, skipped data windows, downtime and goodput.
#pragma once

#include <string>

namespace zaya::aegis {

std::string format_status(const std::string& run_dir);

}  // namespace zaya::aegis
