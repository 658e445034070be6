#include "optim/muon_plan.h"

#include <algorithm>
#include <cmath>

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
  // Balance: move matrices from the busiest to the least busy rank while that narrows the gap.
  double total = 0;
  for (double w : plan.work) total += w;
  const double mean = total / layout.world;
  for (size_t moves = 0; moves < plan.matrices.size(); ++moves) {
    const auto hi =
        size_t(std::max_element(plan.work.begin(), plan.work.end()) - plan.work.begin());
    const auto lo =
        size_t(std::min_element(plan.work.begin(), plan.work.end()) - plan.work.begin());
    const double gap = plan.work[hi] - plan.work[lo];
    if (plan.work[hi] <= 1.05 * mean || gap <= 0) break;
    MuonPlan::Matrix* best = nullptr;
    for (MuonPlan::Matrix& m : plan.matrices) {
      const double c = ns_cost(specs[m.spec]);
      if (size_t(m.owner) != hi || c >= gap) continue;
      if (!best || std::fabs(c - gap / 2) < std::fabs(ns_cost(specs[best->spec]) - gap / 2))
        best = &m;
    }
    if (!best) break;
    const double c = ns_cost(specs[best->spec]);
    best->owner = int(lo);
    plan.work[hi] -= c;
    plan.work[lo] += c;
  }
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
