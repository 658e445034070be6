// Context parallelism over 2 and 3 ranks against whole sequences on one: the ring carries K and V
// (and dK, dV back), the halos cross ranks in both directions, and the loss is the mean over the
// whole group's targets. Lengths include odd ones (unequal chunks) and the smallest allowed
// (chunks of 2 positions).
#include <gtest/gtest.h>

#include "context_parallel_check.h"
#include "mpi_test_env.h"

namespace zaya::dist {
namespace {

TEST(ContextParallel, MatchesWholeSequences) {
  const int N = g_comm->world_size();
  for (const int S : {ContextShard::min_seq_len(N), ContextShard::min_seq_len(N) + 1, 37, 150}) {
    const test::ContextParallelErrors e = test::check_context_parallel(*g_comm, 2, S, 9);
    EXPECT_LE(e.loss, 1e-5) << N << " ranks, S=" << S << ", loss " << e.whole_loss;
    EXPECT_LE(e.grad, 1e-4) << N << " ranks, S=" << S << ": " << e.worst;
  }
}

TEST(ContextParallel, WithRecomputeAndTheLmHeadInBlocks) {
  // Full: the backward recomputes each stage, ring and halos included, in step on every rank.
  // Selective: the convolutions again over the halos the forward kept.
  const int N = g_comm->world_size();
  for (const Recompute mode : {Recompute::kFull, Recompute::kSelective}) {
    const test::ContextParallelErrors e =
        test::check_context_parallel(*g_comm, 2, 6 * N + 1, 12, {5, 64}, mode);
    EXPECT_LE(e.loss, 1e-5) << N << " ranks, " << recompute_name(mode);
    EXPECT_LE(e.grad, 1e-4) << N << " ranks, " << recompute_name(mode) << ": " << e.worst;
  }
}

TEST(ContextParallel, SubGroupsOfOneRankEach) {
  // split by rank: every rank its own group of 1, which must not talk to the others.
  const std::unique_ptr<Communicator> alone = g_comm->split(g_comm->rank(), 0);
  ASSERT_EQ(alone->world_size(), 1);
  const test::ContextParallelErrors e = test::check_context_parallel(*alone, 1, 21, 4);
  EXPECT_LE(e.loss, 1e-5);
  EXPECT_LE(e.grad, 1e-4) << e.worst;
}

TEST(Mpi, SendrecvRingCarriesUnequalSizes) {
  const int N = g_comm->world_size(), r = g_comm->rank();
  // Rank r sends r + 3 values to r + 1 and receives from r − 1 its (r − 1) + 3 values.
  std::vector<float> out(size_t(r) + 3, float(r)), in(size_t((r + N - 1) % N) + 3, -1.0f);
  sendrecv(*g_comm, out.data(), out.size(), (r + 1) % N, in.data(), in.size(), (r + N - 1) % N,
           DType::F32, 5);
  for (float x : in) EXPECT_EQ(x, float((r + N - 1) % N));
  // An open chain: the ends skip the side that has no peer.
  std::vector<float> got(4, -1.0f), mine(4, float(r));
  sendrecv(*g_comm, mine.data(), 4, r + 1 < N ? r + 1 : -1, got.data(), 4, r > 0 ? r - 1 : -1,
           DType::F32, 6);
  for (float x : got) EXPECT_EQ(x, r > 0 ? float(r - 1) : -1.0f);
}

}  // namespace
}  // namespace zaya::dist
