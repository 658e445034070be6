// ZeRO-1 under mpirun (2 and 3 ranks): the bucketed gradient reduce-scatter and weight
// all-gather, and the sharded optimizer against the one-process optimizer. The layout has Muon
// matrices of several shapes, so shard boundaries cut some of them and the Muon neighbour
// exchange runs; with clipping off the sharded update must be bitwise the one-process update.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "../unit/test_util.h"
#include "core/error.h"
#include "model/params.h"
#include "mpi_test_env.h"
#include "optim/optimizer.h"
#include "optim/zero1_sync.h"

namespace zaya {
namespace {

using dist::g_comm;

float value(int rank, int64_t i) {
  return float(std::sin(double(rank) * 77.25 + double(i) * 0.37));
}

std::vector<ParamSpec> test_layout(size_t& total) {
  return test::flat_layout({{{50, 16}, OptimGroup::AdamW},
                            {{48, 16}, OptimGroup::Muon},
                            {{16}, OptimGroup::AdamW},
                            {{16, 40}, OptimGroup::Muon},
                            {{5, 3}, OptimGroup::Muon},
                            {{5}, OptimGroup::Buffer},
                            {{32, 32}, OptimGroup::Muon},
                            {{8, 4, 2}, OptimGroup::AdamW},
                            {{24, 64}, OptimGroup::Muon}},
                           total);
}

TEST(Zero1, ReduceScatterAndAllGatherInAnyBucketSize) {
  const int world = g_comm->world_size(), rank = g_comm->rank();
  const int64_t total = 1001;  // not a multiple of 2 or 3: the last shard is short
  std::vector<float> grads(total);
  for (int64_t i = 0; i < total; ++i) grads[size_t(i)] = value(rank, i);
  for (int64_t bucket : {int64_t(1) << 20, int64_t(7), int64_t(64)}) {
    Zero1Sync sync(*g_comm, total, bucket);
    const ShardLayout& l = sync.layout();
    std::vector<float> shard(size_t(l.size()));
    sync.reduce_scatter_grads(grads.data(), shard.data());
    for (int64_t i = l.begin(); i < l.end(); ++i) {
      float want = value(0, i);
      for (int r = 1; r < world; ++r) want += value(r, i);  // rank order
      ASSERT_EQ(shard[size_t(i - l.begin())], want) << "bucket " << bucket << " element " << i;
    }
    std::vector<float> weights(total, -1.0f);
    for (int64_t i = l.begin(); i < l.end(); ++i) weights[size_t(i)] = value(9, i);
    sync.all_gather_weights(weights.data());
    for (int64_t i = 0; i < total; ++i)
      ASSERT_EQ(weights[size_t(i)], value(9, i)) << "bucket " << bucket << " element " << i;
  }
}

// Three steps of the sharded optimizer against the one-process one on the same gradients.
void compare_with_one_process(double grad_clip, double tolerance) {
  size_t total = 0;
  const std::vector<ParamSpec> specs = test_layout(total);
  OptimConfig config;
  config.lr = 0.02;
  config.grad_clip = grad_clip;
  Optimizer whole(specs, total, config), sharded(specs, total, config, g_comm);
  Zero1Sync sync(*g_comm, int64_t(total), 100);
  const ShardLayout& l = sync.layout();
  ASSERT_EQ(l.begin(), sharded.shard().begin());
  std::vector<float> w1(total), w2(total), g(total), shard(size_t(l.size()));
  for (size_t i = 0; i < total; ++i) w1[i] = w2[i] = value(5, int64_t(i)) * 0.1f;
  int split_matrices = 0;
  for (const ParamSpec& p : specs)
    if (p.group == OptimGroup::Muon &&
        l.owner_of(int64_t(p.offset)) != l.owner_of(int64_t(p.offset) + p.numel - 1))
      ++split_matrices;
  ASSERT_GT(split_matrices, 0) << "the layout must put a Muon matrix across a shard boundary";
  for (int step = 0; step < 3; ++step) {
    for (size_t i = 0; i < total; ++i) g[i] = value(step + 20, int64_t(i)) * 3.0f;
    std::copy(g.begin() + l.begin(), g.begin() + l.end(), shard.begin());
    const float n1 = whole.step(w1.data(), g.data(), config.lr);
    const float n2 = sharded.step(w2.data(), shard.data(), config.lr);
    sync.all_gather_weights(w2.data());
    EXPECT_NEAR(n1, n2, 1e-6 * n1);
  }
  double worst = 0, scale = 0;
  for (size_t i = 0; i < total; ++i) {
    worst = std::max(worst, double(std::fabs(w1[i] - w2[i])));
    scale = std::max(scale, double(std::fabs(w1[i])));
  }
  EXPECT_LE(worst, tolerance * scale) << "clip " << grad_clip;
  const Tensor m = sharded.state_tensors().at("exp_avg");
  EXPECT_EQ(m.numel(), l.size()) << "ZeRO-1 keeps state only for the rank's shard";
}

TEST(Zero1, ShardedOptimizerIsBitwiseTheOneProcessOneWithoutClipping) {
  compare_with_one_process(0.0, 0.0);
}

TEST(Zero1, ShardedOptimizerWithClippingDiffersOnlyByTheNormsSummationOrder) {
  compare_with_one_process(1.0, 1e-6);
}

}  // namespace
}  // namespace zaya
