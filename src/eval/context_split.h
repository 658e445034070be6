// The token ids lm-evaluation-harness scores for a (context, continuation) pair of text, by its
// rules for causal models:
//   - trailing whitespace of the context (Python's str.rstrip()) moves to the front of the
//     continuation;
//   - the context's ids are ids(context); the continuation's are ids(context + continuation)
//     without its first len(ids(context)) ids, so a continuation that merges with the context's
//     last token is scored as the tokenizer would split the whole text;
//   - an empty context becomes the prefix token (the tokenizer's BOS, else its end-of-text), or
//     the continuation's first token when that is the prefix token already (lm-eval asserts that a
//     context is not empty before stripping it; a context of whitespace only is treated as empty).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace zaya {

struct ContextIds {
  std::vector<int32_t> context, continuation;
};

// Throws when the continuation has no token of its own.
ContextIds split_context_continuation(const Tokenizer& tokenizer, std::string_view context,
                                      std::string_view continuation, int32_t prefix_token);

// The prefix token lm-eval puts before an empty context: BOS if the tokenizer has one, else its
// end-of-text token; throws when it has neither.
int32_t loglikelihood_prefix_token(const Tokenizer& tokenizer);

// The length of `text` without its trailing whitespace as Python's str.rstrip() sees it (ASCII
// whitespace, \x1c-\x1f, and the UTF-8 encodings of U+0085, U+00A0 and U+3000).
size_t rstripped_length(std::string_view text);

}  // namespace zaya
