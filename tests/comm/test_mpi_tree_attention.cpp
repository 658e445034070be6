// Tree attention: one sequence's cache sharded over the ranks, each attending over its shard and
// the partials merged, must give the logits of one rank holding everything (and of a full forward)
// at every position, and the same greedy tokens; each rank holds only its share of the blocks.
#include <gtest/gtest.h>

#include "decoder_test_util.h"
#include "infer/batch_decoder.h"
#include "infer/decoder.h"
#include "infer/generate.h"
#include "mpi_test_env.h"

namespace zaya::dist {
namespace {

using test::relative_error;

TEST(TreeAttention, ShardedCacheGivesTheLogitsOfOneRank) {
  ZayaModel model = test::perturbed_tiny(4);  // the same weights on every rank
  const int T = 64, V = int(model.config().vocab_size);
  const std::vector<int32_t> tokens = test::random_tokens(T, V, 11);
  model.forward(tokens, {}, 1, T);
  const std::vector<float> full(model.logits().begin(), model.logits().end());
  // Blocks of 8 positions: at 3 ranks a 3-token prompt lives on rank 0 alone (the other ranks'
  // shards start empty), and 64 positions give ranks 3, 3 and 2 blocks.
  DecoderLimits lim;
  lim.capacity = T;
  lim.block_size = 8;
  BatchDecoder one(model, lim);
  BatchDecoder tree(model, lim, g_comm);
  const KvShard shard{g_comm->rank(), g_comm->world_size()};
  EXPECT_EQ(tree.pool().total_blocks(), shard.local_blocks(T, 8));
  EXPECT_LT(tree.pool().total_blocks(), one.pool().total_blocks());
  for (const int prompt : {1, 3, 20}) {
    const int a = one.add(std::span(tokens).first(size_t(prompt)));
    const int b = tree.add(std::span(tokens).first(size_t(prompt)));
    for (int t = prompt - 1; t < T; ++t) {
      const std::span<const float> want(full.data() + size_t(t) * V, size_t(V));
      ASSERT_LE(relative_error(tree.logits(b), one.logits(a)), 1e-5)
          << "rank " << g_comm->rank() << ", prompt " << prompt << ", position " << t;
      ASSERT_LE(relative_error(tree.logits(b), want), 1e-5) << "position " << t;
      if (t + 1 == T) break;
      one.step(std::vector<int>{a}, std::vector<int32_t>{tokens[size_t(t + 1)]});
      tree.step(std::vector<int>{b}, std::vector<int32_t>{tokens[size_t(t + 1)]});
    }
    one.remove(a);
    tree.remove(b);
  }
}

TEST(TreeAttention, GreedyTokensAreThoseOfOneRank) {
  ZayaModel model = test::perturbed_tiny(5);
  const std::vector<int32_t> prompt = test::random_tokens(6, int(model.config().vocab_size), 2);
  GenerateOptions opt;
  opt.sampling.temperature = 0;
  opt.max_new_tokens = 40;
  Decoder one(model, 64);
  Decoder tree(model, 64, g_comm);
  EXPECT_EQ(generate_tokens(tree, prompt, opt).tokens, generate_tokens(one, prompt, opt).tokens);
  // Seeded sampling too: the draws read the same logits on every rank.
  opt.sampling.temperature = 1;
  opt.sampling.seed = 9;
  EXPECT_EQ(generate_tokens(tree, prompt, opt).tokens, generate_tokens(one, prompt, opt).tokens);
}

}  // namespace
}  // namespace zaya::dist
