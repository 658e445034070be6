// The Muon work plan under ZeRO-1 (optim/muon_plan.h): every matrix has one owner, whole
// matrices stay home unless the work is uneven, the Newton–Schulz work ends balanced, and the
// byte counts follow from the pieces that move.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "model/config.h"
#include "optim/muon_plan.h"
#include "test_util.h"

namespace zaya {
namespace {

std::vector<ParamSpec> uneven_layout(size_t& total) {
  // An AdamW embedding first (so rank 0 of 2 holds few matrices), then matrices of mixed shapes.
  std::vector<std::pair<Shape, OptimGroup>> list = {{{400, 32}, OptimGroup::AdamW}};
  for (int i = 0; i < 12; ++i) list.push_back({{int64_t(16 + 8 * (i % 3)), 32}, OptimGroup::Muon});
  list.push_back({{32}, OptimGroup::AdamW});
  return test::flat_layout(list, total);
}

TEST(MuonPlan, OneProcessOwnsEverythingAndMovesNothing) {
  size_t total = 0;
  const auto specs = uneven_layout(total);
  const MuonPlan plan = plan_muon(specs, ShardLayout{int64_t(total), 1, 0});
  EXPECT_EQ(plan.matrices.size(), 12u);
  int64_t muon_floats = 0;
  for (const auto& m : plan.matrices) {
    EXPECT_EQ(m.owner, 0);
    muon_floats += specs[m.spec].numel;
  }
  EXPECT_EQ(plan.owned_floats, muon_floats);
  EXPECT_EQ(plan.exchange_bytes, 0);
}

TEST(MuonPlan, RanksAgreeAndTheWorkEndsBalanced) {
  size_t total = 0;
  const auto specs = uneven_layout(total);
  for (int world : {2, 3, 4}) {
    std::vector<MuonPlan> plans;
    for (int r = 0; r < world; ++r) plans.push_back(plan_muon(specs, {int64_t(total), world, r}));
    int64_t owned = 0, muon_floats = 0;
    for (const MuonPlan& p : plans) owned += p.owned_floats;
    for (size_t i = 0; i < plans[0].matrices.size(); ++i) {
      muon_floats += specs[plans[0].matrices[i].spec].numel;
      for (const MuonPlan& p : plans)
        ASSERT_EQ(p.matrices[i].owner, plans[0].matrices[i].owner) << "world " << world;
    }
    EXPECT_EQ(owned, muon_floats) << "every matrix is orthogonalised exactly once";
    const auto& work = plans[0].work;
    const double mean = std::accumulate(work.begin(), work.end(), 0.0) / world;
    const double largest_matrix = 48.0 * 32 * 32;
    // Balanced to 5 %, or as close as whole matrices allow.
    EXPECT_LE(*std::max_element(work.begin(), work.end()),
              std::max(1.05 * mean, mean + largest_matrix))
        << "world " << world;
  }
}

TEST(MuonPlan, ExchangeBytesCountThePiecesThatMove) {
  size_t total = 0;
  const auto specs = uneven_layout(total);
  const ShardLayout l0{int64_t(total), 2, 0}, l1{int64_t(total), 2, 1};
  const MuonPlan p0 = plan_muon(specs, l0), p1 = plan_muon(specs, l1);
  int64_t moved = 0;  // floats that leave their holder, over all matrices
  for (const auto& m : p0.matrices) {
    const ParamSpec& s = specs[m.spec];
    moved += s.numel - piece_of(s, m.owner == 0 ? l0 : l1, m.owner).size();
  }
  EXPECT_GT(moved, 0) << "the uneven layout must make the plan move work";
  // Both directions (piece out, result back), 4 bytes each, counted once by each side.
  EXPECT_EQ(p0.exchange_bytes + p1.exchange_bytes, 2 * 2 * 4 * moved);
}

// The balancing as first written: every move scans every matrix for the one nearest half the gap
// (the first in plan order on a tie). The plan's indexed search must choose the same owners.
std::vector<int> owners_by_scan(const std::vector<ParamSpec>& specs, const ShardLayout& layout,
                                std::vector<double>& work, int& moves_made) {
  const auto cost = [&](size_t i) {
    const double r = double(specs[i].shape[0]), c = double(specs[i].shape[1]);
    return r * c * std::min(r, c);
  };
  std::vector<size_t> spec_of;
  std::vector<int> owner;
  work.assign(size_t(layout.world), 0.0);
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].group != OptimGroup::Muon) continue;
    const ParamSpec& p = specs[i];
    int o = layout.owner_of(int64_t(p.offset));
    for (int r = o + 1; r <= layout.owner_of(int64_t(p.offset) + p.numel - 1); ++r)
      if (piece_of(p, layout, r).size() > piece_of(p, layout, o).size()) o = r;
    work[size_t(o)] += cost(i);
    spec_of.push_back(i);
    owner.push_back(o);
  }
  const double mean = std::accumulate(work.begin(), work.end(), 0.0) / layout.world;
  for (size_t moves = 0; moves < owner.size(); ++moves) {
    const auto hi = size_t(std::max_element(work.begin(), work.end()) - work.begin());
    const auto lo = size_t(std::min_element(work.begin(), work.end()) - work.begin());
    const double gap = work[hi] - work[lo];
    if (work[hi] <= 1.05 * mean || gap <= 0) break;
    size_t best = owner.size();
    for (size_t m = 0; m < owner.size(); ++m) {
      const double c = cost(spec_of[m]);
      if (size_t(owner[m]) != hi || c >= gap) continue;
      if (best == owner.size() || std::fabs(c - gap / 2) < std::fabs(cost(spec_of[best]) - gap / 2))
        best = m;
    }
    if (best == owner.size()) break;
    ++moves_made;
    owner[best] = int(lo);
    work[hi] -= cost(spec_of[best]);
    work[lo] += cost(spec_of[best]);
  }
  return owner;
}

TEST(MuonPlan, TheIndexedSearchChoosesWhatAScanOfEveryMatrixChooses) {
  std::mt19937 g(7);
  int moves = 0;
  for (int trial = 0; trial < 200; ++trial) {
    // Few distinct shapes, so that many matrices share a cost (ties), between AdamW tensors of
    // random sizes that push the range boundaries around.
    std::vector<std::pair<Shape, OptimGroup>> list;
    const int n = 1 + int(g() % 60);
    for (int i = 0; i < n; ++i) {
      if (g() % 4 == 0) list.push_back({{int64_t(1 + g() % 5000)}, OptimGroup::AdamW});
      const int64_t dims[] = {8, 16, 24, 48, 96};
      list.push_back({{dims[g() % 5], dims[g() % 5]}, OptimGroup::Muon});
    }
    size_t total = 0;
    const auto specs = test::flat_layout(list, total);
    const int world = 1 + int(g() % 9);
    std::vector<double> want_work;
    const std::vector<int> want =
        owners_by_scan(specs, {int64_t(total), world, 0}, want_work, moves);
    const MuonPlan plan = plan_muon(specs, {int64_t(total), world, 0});
    ASSERT_EQ(plan.matrices.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(plan.matrices[i].owner, want[i]) << "trial " << trial << ", matrix " << i;
    EXPECT_EQ(plan.work, want_work) << "trial " << trial;
  }
  EXPECT_GT(moves, 200) << "the trials must exercise the balancing";
}

}  // namespace
}  // namespace zaya
