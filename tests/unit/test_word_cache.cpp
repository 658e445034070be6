// The BPE encoders' word cache: what goes in comes back, whatever the words' bytes, lengths and
// number of ids, across the table's growth; unknown words miss; the limits hold.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "tokenizer/word_cache.h"

namespace zaya {
namespace {

using Ids = std::vector<int32_t>;

Ids lookup(const WordCache& cache, const std::string& word, bool* found) {
  Ids out = {-7};  // appended to, never replaced
  *found = cache.append(word, out);
  EXPECT_EQ(out.front(), -7);
  return Ids(out.begin() + 1, out.end());
}

TEST(WordCache, EveryRememberedWordComesBackAndOthersMiss) {
  std::mt19937 rng(11);
  WordCache cache(64, size_t(1) << 20);
  std::map<std::string, Ids> truth;
  while (truth.size() < 50000) {  // many times the first table: it grows several times
    std::string word(1 + rng() % 64, '\0');
    for (char& c : word) c = char(rng() % (rng() % 4 == 0 ? 256 : 4));  // NULs, shared prefixes
    if (truth.count(word)) continue;
    Ids ids(rng() % 20);  // none, a few, more than the short-copy path takes
    for (int32_t& id : ids) id = int32_t(rng() % 300000);
    cache.remember(word, ids);
    truth[word] = ids;
  }
  EXPECT_EQ(cache.size(), truth.size());
  bool found = false;
  for (const auto& [word, ids] : truth) {
    ASSERT_EQ(lookup(cache, word, &found), ids) << word.size();
    ASSERT_TRUE(found);
  }
  for (int i = 0; i < 2000; ++i) {
    const std::string unknown = "unknown word " + std::to_string(i);
    EXPECT_TRUE(lookup(cache, unknown, &found).empty());
    EXPECT_FALSE(found) << unknown;
  }
  // A remembered word's prefix and extension are other words.
  const std::string& some = truth.rbegin()->first;
  if (!truth.count(some + "x")) {
    lookup(cache, some + "x", &found);
    EXPECT_FALSE(found);
  }
}

TEST(WordCache, LongWordsAreNotKeptAndAFullCacheStartsAgain) {
  WordCache cache(8, 3);
  EXPECT_TRUE(cache.holds_words_of("12345678"));
  EXPECT_FALSE(cache.holds_words_of("123456789"));
  cache.remember("123456789", Ids{1});
  bool found = true;
  lookup(cache, "123456789", &found);
  EXPECT_FALSE(found);
  EXPECT_EQ(cache.size(), 0u);
  cache.remember("a", Ids{1});
  cache.remember("b", Ids{2});
  cache.remember("c", Ids{3, 4});
  EXPECT_EQ(lookup(cache, "c", &found), (Ids{3, 4}));
  cache.remember("d", Ids{5});  // the fourth: the cache empties first
  EXPECT_EQ(cache.size(), 1u);
  lookup(cache, "a", &found);
  EXPECT_FALSE(found);
  EXPECT_EQ(lookup(cache, "d", &found), (Ids{5}));
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace zaya
