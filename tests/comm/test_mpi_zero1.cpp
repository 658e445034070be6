// ZeRO-1 under mpirun (2 and 3 ranks): the bucketed gradient reduce-scatter and weight
// all-gather, and the sharded optimizer against the one-process optimizer. The layout has Muon
// matrices of several shapes, so shard boundaries cut some of them and the Muon neighbour
// exchange runs; with clipping off the sharded update must be bitwise the one-process update.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "../unit/test_util.h"
#include "core/error.h"
#include "model/params.h"
#include "model/zaya_model.h"
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

// The overlapped reduce against the blocking one: bitwise the same shard, for buckets that cut
// the ranges anywhere. The gradient below each reported offset is garbage until the next report
// (as in a backward still writing it), so a bucket started before its ranges were final would
// carry garbage into the sum.
TEST(Zero1, OverlappedReduceIsBitwiseTheBlockingOneAndStartsOnlyFinalBuckets) {
  const int world = g_comm->world_size(), rank = g_comm->rank();
  const int64_t total = 1001;
  std::vector<float> truth(total);
  for (int64_t i = 0; i < total; ++i) truth[size_t(i)] = value(rank, i);
  const std::vector<int64_t> reports = {1001, 950, 600, 333, 120, 7};  // the last is not 0
  for (int64_t staging : {int64_t(1) << 20, int64_t(7), int64_t(64), int64_t(300)}) {
    Zero1Sync sync(*g_comm, total, staging);
    const ShardLayout& l = sync.layout();
    std::vector<float> want(size_t(l.size())), got(size_t(l.size()), -7.0f);
    sync.reduce_scatter_grads(truth.data(), want.data());
    std::vector<float> grads(total, std::nanf(""));
    sync.begin_reduce(grads.data(), got.data());
    int64_t before = total;
    for (const int64_t x : reports) {
      std::copy(truth.begin() + x, truth.begin() + before, grads.begin() + x);
      sync.grads_final_from(x);
      before = x;
    }
    std::copy(truth.begin(), truth.begin() + before, grads.begin());
    sync.finish_reduce();
    ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)))
        << "staging " << staging;
    // Buckets whose rank-0 range starts at or after 7 may start before finish_reduce, as slots
    // free up (a report never blocks); the first kInFlight of them always do.
    const int64_t b = Zero1Sync::bucket_for(staging, world, l.chunk());
    int64_t early = 0;
    for (int64_t at = 0; at < l.chunk(); at += b) early += at >= reports.back() ? 1 : 0;
    EXPECT_LE(sync.buckets_overlapped(), early) << "staging " << staging;
    EXPECT_GE(sync.buckets_overlapped(), std::min<int64_t>(early, Zero1Sync::kInFlight))
        << "staging " << staging;
    EXPECT_EQ(sync.bucket_count(), (l.chunk() + b - 1) / b);
  }
}

// The trainer's wiring: the model's backward reports the stages it finished
// (ZayaModel::set_gradients_final) and the buckets move while the backward goes on. The shard
// is bitwise the one of a reduce after the whole backward, and buckets started before the
// backward reached the embedding.
TEST(Zero1, OverlapsTheModelsBackward) {
  const int world = g_comm->world_size(), rank = g_comm->rank();
  const ModelConfig config = test::tiny_config();
  const int B = 2, S = 9;
  std::vector<int32_t> tokens(size_t(B) * S);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = int32_t((i * 31 + size_t(rank) * 17) % size_t(config.vocab_size));
  const std::vector<int32_t> targets = ZayaModel::shifted_targets(tokens, B, S);
  ZayaModel model(config);
  test::randomise_weights(model.params(), 3, 4);
  const int64_t total = int64_t(model.params().size());
  Zero1Sync sync(*g_comm, total, 2048 * world);  // buckets of 2,048 floats per rank
  std::vector<float> want(size_t(sync.layout().size())), got(want.size());
  // Two micro-batches, as the trainer does: only the last backward reports.
  model.params().zero_grads();
  model.forward(tokens, targets, B, S);
  model.backward(0.5f);
  model.forward(tokens, targets, B, S);
  std::vector<float> first(model.params().grads(), model.params().grads() + total);
  model.backward(0.5f);
  sync.reduce_scatter_grads(model.params().grads(), want.data());

  std::copy(first.begin(), first.end(), model.params().grads());  // as after micro-batch 1
  model.forward(tokens, targets, B, S);
  int reports = 0;
  int64_t before_embedding = 0;  // buckets started before the backward reached the embedding
  sync.begin_reduce(model.params().grads(), got.data());
  model.set_gradients_final([&](int64_t from) {
    ++reports;
    sync.grads_final_from(from);
    if (from > 0) before_embedding = sync.buckets_overlapped();
  });
  model.backward(0.5f);
  model.set_gradients_final(nullptr);
  sync.finish_reduce();
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)));
  EXPECT_EQ(reports, int(config.num_stages) + 2);  // the head, each stage, the embedding
  EXPECT_GE(sync.bucket_count(), 3);
  EXPECT_GE(before_embedding, Zero1Sync::kInFlight) << "of " << sync.bucket_count() << " buckets";
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
