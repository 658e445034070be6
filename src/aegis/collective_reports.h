// What the supervisor makes of the ranks' collective-timeout reports (dist/collective_watchdog.h):
// each waiting rank reports the collective it waits in (group, sequence number, kind) on its own;
// a rank that never entered it (stopped, stuck in compute, waiting in another call) reports
// nothing about it. The verdict names those ranks: the members of the first timed-out collective
// that did not report waiting in that same call (for a point-to-point wait, its peers that did
// not report a wait of their own).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dist/collective_watchdog.h"

namespace zaya::aegis {

struct CollectiveVerdict {
  dist::CollectiveWait first;  // the wait that began first among the reports
  std::vector<int> waiting;    // the ranks that reported waiting in that same call
  std::vector<int> missing;    // the ranks that never entered it
};

// `reports` must not be empty.
CollectiveVerdict judge_collective_timeouts(const std::vector<dist::CollectiveWait>& reports);

// "rank 2 never entered world reduce_scatter #33 (338436 bytes); ranks 0, 1 waited 3.0 s in it
// (timeout 3 s)".
std::string describe_verdict(const CollectiveVerdict& v);

// A comma-separated list of ranks: "0, 1".
std::string rank_list(const std::vector<int>& ranks);

}  // namespace zaya::aegis
