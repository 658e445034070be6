// ZeRO-2 under mpirun (2 and 3 ranks): each range reduced onto its owner as the backward
// finishes it (optim/zero2_reduce.h) gives bitwise the shard of ZeRO-1's reduce-scatter, never
// reads a gradient before it is final or after it was given back, gives back every gradient
// exactly once, and adds later micro-batches in order; on a model's backward it overlaps and
// leaves the gradients given back (zero).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "../unit/test_util.h"
#include "model/zaya_model.h"
#include "mpi_test_env.h"
#include "optim/zero1_sync.h"
#include "optim/zero2_reduce.h"

namespace zaya {
namespace {

using dist::g_comm;

float value(int rank, int64_t i) {
  return float(std::sin(double(rank) * 41.75 + double(i) * 0.61));
}

std::vector<float> contributions(int rank, int64_t total, int salt) {
  std::vector<float> v(static_cast<size_t>(total));
  for (int64_t i = 0; i < total; ++i) v[size_t(i)] = value(rank + 7 * salt, i);
  return v;
}

// The gradient below each reported offset is NaN until the next report (a backward still writing
// it), and every stretch given back is overwritten with NaN (memory that is gone): a bucket
// started early, or one read after its release, carries NaN into the shard.
TEST(Zero2, ReduceToOwnersIsBitwiseZero1sReduceScatter) {
  const int rank = g_comm->rank();
  const int64_t total = 1001;
  const std::vector<float> truth = contributions(rank, total, 0);
  const std::vector<int64_t> reports = {1001, 950, 600, 333, 120, 7};
  for (int64_t staging : {int64_t(1) << 20, int64_t(7), int64_t(64), int64_t(300)}) {
    Zero1Sync one(*g_comm, total, staging);
    const ShardLayout& l = one.layout();
    std::vector<float> want(size_t(l.size())), got(size_t(l.size()), -7.0f);
    one.reduce_scatter_grads(truth.data(), want.data());

    Zero2Reduce two(*g_comm, total, staging);
    ASSERT_EQ(two.layout().begin(), l.begin());
    std::vector<float> grads(size_t(total), std::nanf(""));
    std::vector<std::pair<int64_t, int64_t>> released;
    int64_t final_from = total;
    two.begin(grads.data(), got.data(), /*accumulate=*/false, [&](int64_t offset, int64_t n) {
      EXPECT_GE(offset, final_from) << "a stretch given back before it was final";
      released.emplace_back(offset, n);
      std::fill_n(grads.begin() + offset, n, std::nanf(""));
    });
    int64_t before = total;
    for (const int64_t x : reports) {
      std::copy(truth.begin() + x, truth.begin() + before, grads.begin() + x);
      final_from = x;
      two.grads_final_from(x);
      before = x;
    }
    std::copy(truth.begin(), truth.begin() + before, grads.begin());
    final_from = 0;
    two.finish();
    ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)))
        << "staging " << staging;
    // Every gradient given back once, from the end of the buffer down.
    int64_t expect_end = total;
    for (const auto& [offset, n] : released) {
      EXPECT_EQ(offset + n, expect_end) << "staging " << staging;
      expect_end = offset;
    }
    EXPECT_EQ(expect_end, 0) << "staging " << staging;
    EXPECT_EQ(int64_t(released.size()), two.bucket_count());
    EXPECT_GE(two.buckets_overlapped(), std::min<int64_t>(two.bucket_count(), 1))
        << "buckets above offset 7 start before finish";
    EXPECT_EQ(two.bytes_per_reduce(), 4 * (total - l.size()));
  }
}

// A later micro-batch's sums are added to the shard: (Σ_r a_r) + (Σ_r b_r), each sum in rank
// order, written out here from every rank's values.
TEST(Zero2, LaterMicroBatchesAreAddedInOrder) {
  const int world = g_comm->world_size(), rank = g_comm->rank();
  const int64_t total = 777;
  Zero2Reduce two(*g_comm, total, 50);
  const ShardLayout& l = two.layout();
  std::vector<float> shard(size_t(l.size()), -1.0f);
  for (int salt = 1; salt <= 2; ++salt) {
    std::vector<float> grads = contributions(rank, total, salt);
    two.begin(grads.data(), shard.data(), /*accumulate=*/salt > 1, nullptr);
    two.grads_final_from(500);
    two.finish();
  }
  for (int64_t i = l.begin(); i < l.end(); ++i) {
    float a = value(0 + 7, i), b = value(0 + 14, i);
    for (int r = 1; r < world; ++r) {
      a += value(r + 7, i);
      b += value(r + 14, i);
    }
    ASSERT_EQ(shard[size_t(i - l.begin())], a + b) << "element " << i;
  }
}

// On a model: one backward reduced while it runs, its gradients kept on demand and given back
// as they move. The shard is bitwise ZeRO-1's reduce-scatter of the same backward, buckets move
// before the backward reaches the embedding, and afterwards every gradient reads zero.
TEST(Zero2, OverlapsTheModelsBackwardAndGivesBackItsGradients) {
  const int rank = g_comm->rank();
  const ModelConfig config = test::tiny_config();
  const int B = 2, S = 9;
  std::vector<int32_t> tokens(size_t(B) * S);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = int32_t((i * 29 + size_t(rank) * 13) % size_t(config.vocab_size));
  const std::vector<int32_t> targets = ZayaModel::shifted_targets(tokens, B, S);
  ZayaModel model(config);
  test::randomise_weights(model.params(), 3, 4);
  const int64_t total = int64_t(model.params().size());
  Zero1Sync one(*g_comm, total, 1024 * g_comm->world_size());
  std::vector<float> want(size_t(one.layout().size())), got(want.size(), -3.0f);
  model.params().zero_grads();
  model.forward(tokens, targets, B, S);
  model.backward(1.0f);
  one.reduce_scatter_grads(model.params().grads(), want.data());

  ParameterPlacement& placement = model.placement();
  placement.set_gradients_on_demand(true);
  Zero2Reduce two(*g_comm, total, 1024 * g_comm->world_size());
  model.forward(tokens, targets, B, S);
  int64_t before_embedding = 0;
  two.begin(model.params().grads(), got.data(), false, [&](int64_t offset, int64_t n) {
    placement.decommit_grads(size_t(offset), size_t(n));
  });
  model.set_gradients_final([&](int64_t from) {
    two.grads_final_from(from);
    if (from > 0) before_embedding = two.buckets_overlapped();
  });
  model.backward(1.0f);
  model.set_gradients_final(nullptr);
  two.finish();
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)));
  EXPECT_GE(two.bucket_count(), 3);
  EXPECT_GE(before_embedding, 1) << "of " << two.bucket_count() << " buckets";
  const float* g = model.params().grads();
  for (int64_t i = 0; i < total; ++i) ASSERT_EQ(g[i], 0.0f) << "gradient " << i << " kept";
}

}  // namespace
}  // namespace zaya
