#include "optim/muon_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>

namespace zaya {

namespace {

double ns_cost(const ParamSpec& p) {
  const double r = double(p.shape[0]), c = double(p.shape[1]);
  return r * c * std::min(r, c);
}

int first_holder(const ParamSpec& p, const ShardLayout& l) {
  return l.owner_of(int64_t(p.offset));
}
int last_holder(const ParamSpec& p, const ShardLayout& l) {
  return l.owner_of(int64_t(p.offset) + p.numel - 1);
}

// Each rank's matrices by cost: cost -> their indices into plan.matrices. A move takes the matrix
// whose cost is nearest half the gap (and below the gap), the first in plan order on a tie; by
// cost, that is a walk over the few costs around half the gap instead of a scan of every matrix
// (a scan per move made `zaya info` on a 4096-stage model take 10 s).
using CostIndex = std::map<double, std::set<size_t>>;

// The index (into plan.matrices) of the matrix of `by_cost` nearest gap / 2 with a cost below
// `gap`; ties go to the lowest index. SIZE_MAX when there is none.
size_t nearest_half_gap(const CostIndex& by_cost, double gap) {
  const double half = gap / 2;
  double best_d = std::numeric_limits<double>::infinity();
  size_t best = SIZE_MAX;
  // Distances grow (never shrink) away from half in both directions, so each walk stops at the
  // first cost farther than the best; equal distances may repeat (rounding), so they are taken.
  const auto consider = [&](const CostIndex::value_type& entry) {
    const double d = std::fabs(entry.first - half);
    if (d > best_d) return false;
    if (d < best_d || *entry.second.begin() < best) best = *entry.second.begin();
    best_d = d;
    return true;
  };
  const auto up = by_cost.lower_bound(half);
  for (auto it = up; it != by_cost.end() && it->first < gap && consider(*it); ++it) {
  }
  for (auto it = up; it != by_cost.begin();)
    if (!consider(*--it)) break;
  return best;
}

// While the busiest rank's work exceeds the mean by more than 5 %, move one of its matrices to the
// least busy rank: the one nearest half the gap, if any narrows it.
void balance(MuonPlan& plan, const std::vector<ParamSpec>& specs) {
  std::vector<CostIndex> by_cost(plan.work.size());
  for (size_t i = 0; i < plan.matrices.size(); ++i)
    by_cost[size_t(plan.matrices[i].owner)][ns_cost(specs[plan.matrices[i].spec])].insert(i);
  double total = 0;
  for (double w : plan.work) total += w;
  const double mean = total / double(plan.work.size());
  for (size_t moves = 0; moves < plan.matrices.size(); ++moves) {
    const auto hi =
        size_t(std::max_element(plan.work.begin(), plan.work.end()) - plan.work.begin());
    const auto lo =
        size_t(std::min_element(plan.work.begin(), plan.work.end()) - plan.work.begin());
    const double gap = plan.work[hi] - plan.work[lo];
    if (plan.work[hi] <= 1.05 * mean || gap <= 0) break;
    const size_t best = nearest_half_gap(by_cost[hi], gap);
    if (best == SIZE_MAX) break;
    MuonPlan::Matrix& m = plan.matrices[best];
    const double c = ns_cost(specs[m.spec]);
    const auto from = by_cost[hi].find(c);
    from->second.erase(best);
    if (from->second.empty()) by_cost[hi].erase(from);
    by_cost[lo][c].insert(best);
    m.owner = int(lo);
    plan.work[hi] -= c;
    plan.work[lo] += c;
  }
}

}  // namespace

FlatPiece piece_of(const ParamSpec& p, const ShardLayout& layout, int rank) {
  const int64_t b = std::max<int64_t>(layout.begin_of(rank), int64_t(p.offset));
  const int64_t e = std::min<int64_t>(layout.end_of(rank), int64_t(p.offset) + p.numel);
  return b < e ? FlatPiece{b, e} : FlatPiece{b, b};
}

MuonPlan plan_muon(const std::vector<ParamSpec>& specs, const ShardLayout& layout) {
  MuonPlan plan;
  plan.work.assign(size_t(layout.world), 0.0);
  for (size_t i = 0; i < specs.size(); ++i) {
    const ParamSpec& p = specs[i];
    if (p.group != OptimGroup::Muon) continue;
    MuonPlan::Matrix m;
    m.spec = i;
    m.owner = first_holder(p, layout);
    for (int r = m.owner + 1; r <= last_holder(p, layout); ++r)
      if (piece_of(p, layout, r).size() > piece_of(p, layout, m.owner).size()) m.owner = r;
    plan.work[size_t(m.owner)] += ns_cost(p);
    plan.matrices.push_back(m);
  }
  balance(plan, specs);
  for (MuonPlan::Matrix& m : plan.matrices) {
    const ParamSpec& p = specs[m.spec];
    const int64_t mine = piece_of(p, layout, layout.rank).size();
    if (m.owner == layout.rank) {
      m.owned_offset = plan.owned_floats;
      plan.owned_floats += p.numel;
      plan.exchange_bytes += 2 * 4 * (p.numel - mine);
    } else {
      plan.exchange_bytes += 2 * 4 * mine;
    }
  }
  return plan;
}

}  // namespace zaya
