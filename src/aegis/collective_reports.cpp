#include "aegis/collective_reports.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "core/error.h"

namespace zaya::aegis {

namespace {

bool same_call(const dist::CollectiveWait& a, const dist::CollectiveWait& b) {
  return a.group == b.group && a.seq == b.seq && a.kind == b.kind;
}

}  // namespace

CollectiveVerdict judge_collective_timeouts(const std::vector<dist::CollectiveWait>& reports) {
  ZAYA_CHECK(!reports.empty(), "judge_collective_timeouts: no reports");
  CollectiveVerdict v;
  v.first = *std::min_element(reports.begin(), reports.end(), [](const auto& a, const auto& b) {
    return a.since < b.since || (a.since == b.since && a.rank < b.rank);
  });
  std::set<int> waiting, reporting;
  for (const dist::CollectiveWait& r : reports) {
    reporting.insert(r.rank);
    if (v.first.peers.empty() ? same_call(r, v.first) : r.group == v.first.group)
      waiting.insert(r.rank);
  }
  v.waiting.assign(waiting.begin(), waiting.end());
  // A collective needs every member; a point-to-point call its peers.
  const std::vector<int>& needed = v.first.peers.empty() ? v.first.members : v.first.peers;
  for (const int r : needed)
    if (!waiting.count(r)) v.missing.push_back(r);
  std::sort(v.missing.begin(), v.missing.end());
  v.missing.erase(std::unique(v.missing.begin(), v.missing.end()), v.missing.end());
  return v;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (const int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

std::string describe_verdict(const CollectiveVerdict& v) {
  const dist::CollectiveWait& f = v.first;
  char call[256];
  std::snprintf(call, sizeof call, "%s %s #%lld (%lld bytes)", f.group.c_str(), f.kind.c_str(),
                (long long)f.seq, (long long)f.bytes);
  char waited[128];
  std::snprintf(waited, sizeof waited, " waited %.1f s in it (timeout %.3g s)", f.waited_s,
                f.timeout_s);
  std::string s;
  if (v.missing.empty())
    s = "every rank of " + std::string(call) +
        " reported waiting in it (a deadlock inside the "
        "communication library or between its calls)";
  else
    s = (v.missing.size() == 1 ? "rank " : "ranks ") + rank_list(v.missing) + " never entered " +
        call;
  return s + "; " + (v.waiting.size() == 1 ? "rank " : "ranks ") + rank_list(v.waiting) + waited;
}

}  // namespace zaya::aegis
