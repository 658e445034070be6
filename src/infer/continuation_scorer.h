// Log-likelihoods of continuations given contexts, as lm-evaluation-harness scores its
// `loglikelihood` requests: the sum of log p(token | everything before it) over the continuation's
// tokens, and whether every continuation token is the argmax of its logits (`is_greedy`).
//
// Each distinct context of consecutive requests is prefilled once in the BatchDecoder; its choices
// fork that sequence (same cache, no recomputation) and their tokens are decoded together in
// batched steps with the other items' choices (continuous batching: an item's choices join as soon
// as there are free slots for all of them). A request's score does not depend on what shares its
// steps, bit for bit. Inputs longer than the decoder's context lose tokens on the left, as lm-eval
// truncates (context + continuation)[-(max_length + 1):].
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/zaya_model.h"

namespace zaya {

struct ContinuationRequest {
  std::vector<int32_t> context;       // at least one token
  std::vector<int32_t> continuation;  // at least one token
};

struct ContinuationScore {
  double logprob = 0;                  // sum of token_logprobs
  bool is_greedy = true;               // every continuation token is its position's argmax
  std::vector<double> token_logprobs;  // one per continuation token
};

// `max_sequences`: sequences decoded together (the choices of several items); a context with
// more choices than that is prefilled once per chunk of choices.
std::vector<ContinuationScore> score_continuations(ZayaModel& model,
                                                   std::span<const ContinuationRequest> requests,
                                                   int max_sequences = 32);

// log_softmax(logits)[token] in double, and whether `token` is the first maximum of `logits`.
double token_logprob(std::span<const float> logits, int32_t token, bool* is_argmax = nullptr);

}  // namespace zaya
