// Byte-level BPE training: the 256 single-byte tokens, then repeatedly the most frequent adjacent
// pair over the pre-tokenised words of the corpus becomes a new token, then the special tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe_tokenizer.h"

namespace zaya {

struct BpeTrainOptions {
  int32_t vocab_size = 4096;  // all tokens: 256 bytes + merges + special tokens
  // Pairs seen fewer times than this are never merged (the vocabulary may then stay smaller).
  int64_t min_pair_count = 2;
  std::vector<std::string> special_tokens = {"<|endoftext|>"};
  // Called now and then with (merges done, merges wanted).
  std::function<void(int32_t, int32_t)> progress;
};

// Occurrences of each GPT-2 pre-tokenised word.
using WordCounts = std::unordered_map<std::string, int64_t>;
void count_words(std::string_view text, WordCounts& counts);

// Deterministic: ties in pair frequency go to the pair whose (left bytes, right bytes) is
// lexicographically smallest. Pair counts are updated incrementally: a merge revisits only the
// words that contain the merged pair.
BpeTokenizer train_bpe(const WordCounts& counts, const BpeTrainOptions& options);
BpeTokenizer train_bpe(const std::vector<std::string>& texts, const BpeTrainOptions& options);

}  // namespace zaya
