// The logprobs entries of zaya serve: the most likely ids listed, never the padding of a padded
// vocabulary (ids past the tokenizer's, which have no text), with the model's log-probabilities.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "serve/logprobs.h"

namespace zaya::serve {
namespace {

TEST(ServeLogprobs, NeverListsPaddingIds) {
  // Ids 4 and 5 (padding past a 4-token tokenizer) are the likeliest; the three listed are the
  // likeliest of ids 0-3.
  const std::vector<float> logits = {0, 1, 2, 3, 10, 9};
  double sum = 0;
  for (float l : logits) sum += std::exp(double(l));
  const double log_z = std::log(sum);
  const TokenLogprob e = token_logprob_entry(logits, 1, 3, 4);
  ASSERT_EQ(e.top.size(), 3u);
  const int32_t want[] = {3, 2, 1};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(e.top[i].first, want[i]);
    // The model's log-probability, over all six ids.
    EXPECT_NEAR(e.top[i].second, double(logits[size_t(want[i])]) - log_z, 1e-9);
  }
  ASSERT_TRUE(e.logprob.has_value());
  EXPECT_NEAR(*e.logprob, 1.0 - log_z, 1e-9);
  // With every id listable, 4 and 5 come first.
  const TokenLogprob all = token_logprob_entry(logits, 1, 2, logits.size());
  ASSERT_EQ(all.top.size(), 3u);  // the two likeliest, then the token itself
  EXPECT_EQ(all.top[0].first, 4);
  EXPECT_EQ(all.top[1].first, 5);
  EXPECT_EQ(all.top[2].first, 1);
}

}  // namespace
}  // namespace zaya::serve
