// The OpenAI completions `logprobs` object, as vLLM fills it and lm-evaluation-harness reads it:
// per token its text (`tokens`), its log-probability (`token_logprobs`; null for the first prompt
// token, which nothing predicts), the N most likely tokens at its position with the token itself
// (`top_logprobs`) and where its text starts in the choice's text (`text_offset`, bytes).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace zaya::serve {

struct TokenLogprob {
  int32_t token = 0;
  std::optional<double> logprob;                // none for the first prompt token
  std::vector<std::pair<int32_t, double>> top;  // the N most likely, then the token if not in them
};

// From the logits [V] the token was predicted from. Only ids [0, listable) are listed among the
// most likely: the tokenizer's, so that the padding of a padded vocabulary (ids with no text,
// generate.h's is_vocabulary_padding) never is. Log-probabilities are the model's, over all V.
TokenLogprob token_logprob_entry(std::span<const float> logits, int32_t token, int top_n,
                                 size_t listable);

// `entries` in order (echoed prompt tokens first); text offsets count from `offset`.
nlohmann::json logprobs_json(const Tokenizer& tokenizer, std::span<const TokenLogprob> entries,
                             size_t offset);

}  // namespace zaya::serve
