// Context parallelism on one rank: the sequence still cuts into 2 chunks, so the layout, the halo
// (chunk 1's comes from chunk 0 on the same rank), the block-wise attention with its merge and the
// local RoPE rows all run; only the transfers do not (tests/comm runs them at 2 and 3 ranks).
#include <gtest/gtest.h>

#include "context_parallel_check.h"
#include "core/error.h"
#include "dist/local_communicator.h"

namespace zaya {
namespace {

TEST(ContextShard, LayoutIsBalancedAndCoversTheSequence) {
  // 3 ranks of a 13-token sequence: 6 chunks of 2 or 3 positions; rank r holds r and 5 − r.
  dist::LocalCommunicator one;
  const ContextShard s(&one, 13);
  EXPECT_EQ(s.chunks(), 2);
  EXPECT_EQ(s.chunk_begin(0), 0);
  EXPECT_EQ(s.chunk_begin(1), 6);
  EXPECT_EQ(s.chunk_begin(2), 13);
  EXPECT_EQ(s.local_len(), 13);
  for (int t = 0; t < 13; ++t) EXPECT_EQ(s.position(t), t);
  const std::vector<int> full = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12,
                                 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25};
  EXPECT_EQ(s.take<int>(full, 2), full);
}

TEST(ContextShard, RefusesChunksShorterThanTheHalo) {
  dist::LocalCommunicator one;
  EXPECT_NO_THROW(ContextShard(&one, 4));
  try {
    ContextShard(&one, 3);
    FAIL() << "a 3-token sequence cut into 2 chunks was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("seq_len must be >= 4"), std::string::npos) << e.what();
  }
}

TEST(ContextParallel, OneRankMatchesWholeSequences) {
  dist::LocalCommunicator one;
  // Odd lengths, the smallest allowed (two chunks of 2), and chunks longer than the attention
  // kernel's 64-row block.
  for (const int S : {4, 5, 13, 40, 161}) {
    const test::ContextParallelErrors e = test::check_context_parallel(one, 2, S, 3);
    EXPECT_LE(e.loss, 1e-5) << "S=" << S;
    EXPECT_LE(e.grad, 1e-4) << "S=" << S << ": " << e.worst;
  }
}

TEST(ContextParallel, ChunkedLmHeadUnderContextParallelism) {
  dist::LocalCommunicator one;
  const test::ContextParallelErrors e = test::check_context_parallel(one, 2, 24, 5, {7, 100});
  EXPECT_LE(e.loss, 1e-5);
  EXPECT_LE(e.grad, 1e-4) << e.worst;
}

}  // namespace
}  // namespace zaya
