// Choosing the next token from logits: greedy, temperature, top-k, top-p (nucleus) and a
// repetition penalty. Each draw is a pure function of (seed, position), so the same request and
// seed give the same text however requests are scheduled.
#pragma once

#include <cstdint>
#include <span>

namespace zaya {

struct SamplingParams {
  float temperature = 1.0f;         // 0: greedy (argmax, ties to the lower id)
  int top_k = 0;                    // keep the k most likely tokens (0: all)
  float top_p = 1.0f;               // keep the smallest set whose probability reaches p
  float repetition_penalty = 1.0f;  // > 1 discourages tokens already in the context (CTRL's rule)
  uint64_t seed = 0;
};

// Throws naming the field when a parameter is out of range (temperature < 0, top_p outside
// (0, 1], repetition_penalty <= 0, top_k < 0).
void validate_sampling(const SamplingParams& p);

// The next token after `context` (prompt + generated so far) given its logits. `position` is the
// index of the token being drawn (its random number's counter).
int32_t sample_next(std::span<const float> logits, std::span<const int32_t> context,
                    const SamplingParams& p, uint64_t position);

}  // namespace zaya
