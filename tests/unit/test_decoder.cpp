// Decoding against the CCA caches must give what the full forward gives: prefill + one token at
// a time against the logits of one forward over the whole sequence at every position, greedy
// generation against the argmax chain of full forwards, and the sampling rules.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"
#include "decoder_test_util.h"
#include "infer/decoder.h"
#include "infer/generate.h"
#include "infer/sampling.h"
#include "model/config.h"
#include "model/zaya_model.h"

namespace zaya {
namespace {

using test::perturbed_tiny;
using test::random_tokens;
using test::relative_error;

TEST(Decoder, PrefillAndDecodeMatchTheFullForward) {
  ZayaModel model = perturbed_tiny(4);
  const ModelConfig& c = model.config();
  const int T = 64, V = int(c.vocab_size);
  const std::vector<int32_t> tokens = random_tokens(T, V, 11);
  model.forward(tokens, {}, 1, T);
  const std::vector<float> full(model.logits().begin(), model.logits().end());
  // The sequence takes every route of every MoE stage (experts and skip), so the decode path
  // is checked through each expert.
  for (int i = 1; i < int(c.num_stages); i += 2) {
    const std::span<const int32_t> r = model.routes(i);
    EXPECT_EQ(std::set<int32_t>(r.begin(), r.end()).size(), size_t(c.num_routes()))
        << "stage " << i;
  }
  for (const int prompt : {1, 2, 3, 17, 63}) {
    Decoder dec(model, 64);
    std::span<const float> logits = dec.prefill(std::span(tokens).first(size_t(prompt)));
    for (int t = prompt - 1; t < T; ++t) {
      const std::span<const float> want(full.data() + size_t(t) * V, size_t(V));
      ASSERT_LE(relative_error(logits, want), 1e-5) << "prompt " << prompt << ", position " << t;
      if (t + 1 < T) logits = dec.step(tokens[size_t(t + 1)]);
    }
    EXPECT_EQ(dec.length(), T);
  }
}

// The argmax chain of full forwards over the growing sequence (the last `window` tokens).
std::vector<int32_t> argmax_chain(ZayaModel& model, std::vector<int32_t> seq, int n, int window) {
  const int V = int(model.config().vocab_size);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    const size_t w = std::min<size_t>(seq.size(), size_t(window));
    const std::vector<int32_t> ctx(seq.end() - long(w), seq.end());
    model.forward(ctx, {}, 1, int(w));
    const float* row = model.logits().data() + (w - 1) * size_t(V);
    const int32_t next = int32_t(std::max_element(row, row + V) - row);
    seq.push_back(next);
    out.push_back(next);
  }
  return out;
}

// 14 greedy tokens after a 6-token random prompt.
struct GreedyRun : ::testing::Test {
  ZayaModel model = perturbed_tiny(5);
  std::vector<int32_t> prompt = random_tokens(6, int(model.config().vocab_size), 2);
  GenerateOptions opt = [] {
    GenerateOptions o;
    o.sampling.temperature = 0;
    o.max_new_tokens = 14;
    return o;
  }();
};

TEST_F(GreedyRun, IsTheArgmaxChain) {
  {
    Decoder dec(model);
    const GenerateResult r = generate_tokens(dec, prompt, opt);
    EXPECT_EQ(r.finish_reason, "length");
    EXPECT_EQ(r.tokens, argmax_chain(model, prompt, 14, 1 << 30));
  }
  // A decoder of 10 positions: past it, each token sees the last 10 (prefilled again).
  Decoder small(model, 10);
  EXPECT_EQ(generate_tokens(small, prompt, opt).tokens, argmax_chain(model, prompt, 14, 10));
}

TEST_F(GreedyRun, StopsAtEosAndWhenAsked) {
  Decoder dec(model);
  const std::vector<int32_t> all = generate_tokens(dec, prompt, opt).tokens;
  opt.eos = all[4];
  const size_t first = size_t(std::find(all.begin(), all.end(), opt.eos) - all.begin());
  GenerateResult r = generate_tokens(dec, prompt, opt);
  EXPECT_EQ(r.finish_reason, "eos");
  EXPECT_EQ(r.tokens, std::vector<int32_t>(all.begin(), all.begin() + long(first) + 1));
  opt.eos = -1;
  int seen = 0;
  r = generate_tokens(dec, prompt, opt, [&](int32_t) { return ++seen < 3; });
  EXPECT_EQ(r.finish_reason, "stop");
  EXPECT_EQ(r.tokens.size(), 3u);
}

TEST(Decoder, CacheIsCcasCompressedKeysAndValues) {
  const ModelConfig base = load_model_config(ZAYA_SOURCE_DIR "/configs/zaya1-base.json");
  // 40 attention stages × 2 × (2 kv heads × 128) floats, against 2 × 2048 for multi-head.
  EXPECT_EQ(Decoder::cache_bytes_per_token(base), 40 * 2 * 256 * 4);
  EXPECT_EQ(Decoder::mha_cache_bytes_per_token(base), 8 * Decoder::cache_bytes_per_token(base));
  ZayaModel model = perturbed_tiny(1);
  Decoder dec(model, 32);
  const ModelConfig& c = model.config();
  EXPECT_EQ(dec.cache_bytes_allocated(),
            c.num_attention_stages() * 4 *
                (32 * 2 * c.kv_dim() + 2 * c.conv_channels() + c.kv_dim() / 2));
  EXPECT_THROW(dec.step(1), Error);  // nothing prefilled
  EXPECT_THROW(dec.prefill(std::vector<int32_t>(33, 1)), Error);
  dec.prefill(std::vector<int32_t>(32, 1));
  EXPECT_THROW(dec.step(1), Error);  // full
}

TEST(Sampling, GreedyTopKTopPAndPenalty) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, -2.0f};
  SamplingParams p;
  p.temperature = 0;
  EXPECT_EQ(sample_next(logits, {}, p, 0), 1);  // ties go to the lower id
  p.temperature = 1, p.top_k = 1;
  for (uint64_t i = 0; i < 50; ++i) EXPECT_EQ(sample_next(logits, {}, p, i), 1);
  p.top_k = 0, p.top_p = 0.01f;
  for (uint64_t i = 0; i < 50; ++i) EXPECT_EQ(sample_next(logits, {}, p, i), 1);
  // Penalty 2 halves the positive logits of tokens in the context: 3 → 1.5 for id 1, so id 2
  // is the argmax; a negative logit is doubled.
  p = SamplingParams{};
  p.temperature = 0, p.repetition_penalty = 2;
  const std::vector<int32_t> ctx = {1, 1, 3};
  EXPECT_EQ(sample_next(logits, ctx, p, 0), 2);
  const std::vector<float> neg = {-1.0f, -1.5f};
  const std::vector<int32_t> ctx0 = {0};
  EXPECT_EQ(sample_next(neg, ctx0, p, 0), 1);  // -1 → -2 < -1.5
}

// A model whose vocabulary is padded past its tokenizer's (ZAYA1: 262,272 rows, Gemma-3's 262,144
// tokens) never draws a padding id, whatever its logit; anything else is not padding.
TEST(Sampling, PaddingIdsAreNeverDrawn) {
  EXPECT_TRUE(is_vocabulary_padding(262144, 262272));
  EXPECT_FALSE(is_vocabulary_padding(262272, 262272));  // the same size: no padding
  EXPECT_FALSE(is_vocabulary_padding(300, 512));        // 41 % more: another tokenizer
  EXPECT_FALSE(is_vocabulary_padding(510, 520));        // not a multiple of 64
  EXPECT_FALSE(is_vocabulary_padding(600, 512));        // a larger tokenizer
  EXPECT_TRUE(is_vocabulary_padding(4090, 4096));
  std::vector<float> logits = {0.5f, 1.0f, 0.25f, 9.0f, 8.0f};  // ids 3 and 4: padding
  GenerateOptions opt;
  opt.drawable = 3;
  EXPECT_EQ(drawable_logits(logits, opt).size(), 3u);
  opt.sampling.temperature = 0;
  EXPECT_EQ(sample_next(drawable_logits(logits, opt), {}, opt.sampling, 0), 1);
  opt.sampling.temperature = 1;
  for (uint64_t i = 0; i < 200; ++i)
    EXPECT_LT(sample_next(drawable_logits(logits, opt), {}, opt.sampling, i), 3);
  opt.drawable = 0;  // unset: every id
  EXPECT_EQ(drawable_logits(logits, opt).size(), 5u);
}

TEST(Sampling, DrawsFollowTheDistributionAndTheSeed) {
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  SamplingParams p;
  p.seed = 7;
  std::vector<int> count(3, 0);
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++count[size_t(sample_next(logits, {}, p, uint64_t(i)))];
  EXPECT_NEAR(count[0] / double(n), 0.5, 0.015);
  EXPECT_NEAR(count[1] / double(n), 0.3, 0.015);
  EXPECT_NEAR(count[2] / double(n), 0.2, 0.015);
  // top_p 0.75 keeps {0, 1} (0.5 < 0.75 <= 0.8): renormalised 0.625 / 0.375.
  p.top_p = 0.75f;
  std::fill(count.begin(), count.end(), 0);
  for (int i = 0; i < n; ++i) ++count[size_t(sample_next(logits, {}, p, uint64_t(i)))];
  EXPECT_EQ(count[2], 0);
  EXPECT_NEAR(count[0] / double(n), 0.625, 0.015);
  // Same seed and position: same token; another seed: another sequence.
  p.top_p = 1;
  SamplingParams q = p;
  q.seed = 8;
  int same = 0, differ = 0;
  for (uint64_t i = 0; i < 200; ++i) {
    same += sample_next(logits, {}, p, i) == sample_next(logits, {}, p, i);
    differ += sample_next(logits, {}, p, i) != sample_next(logits, {}, q, i);
  }
  EXPECT_EQ(same, 200);
  EXPECT_GT(differ, 50);
}

TEST(Sampling, RejectsOutOfRangeParameters) {
  SamplingParams p;
  p.temperature = -1;
  EXPECT_THROW(validate_sampling(p), Error);
  p = SamplingParams{};
  p.top_p = 0;
  EXPECT_THROW(validate_sampling(p), Error);
  p.top_p = 1.5f;
  EXPECT_THROW(validate_sampling(p), Error);
  p = SamplingParams{};
  p.repetition_penalty = 0;
  EXPECT_THROW(validate_sampling(p), Error);
  p = SamplingParams{};
  p.top_k = -3;
  EXPECT_THROW(validate_sampling(p), Error);
  EXPECT_NO_THROW(validate_sampling(SamplingParams{}));
}

}  // namespace
}  // namespace zaya
