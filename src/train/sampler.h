// Text generation for samples during and after training: temperature + top-k sampling, each draw
// a pure function of (seed, position), recomputing the full forward per token (fine for the short
// samples a training run prints; the compressed-KV-cache decoder belongs to the inference work).
#pragma once

#include <cstdint>
#include <vector>

#include "model/zaya_model.h"

namespace zaya {

struct SampleOptions {
  int max_new_tokens = 64;
  float temperature = 0.8f;  // 0 = greedy
  int top_k = 40;            // 0 = whole vocabulary
  uint64_t seed = 1;
  int32_t stop_token = -1;  // generation ends after emitting it (e.g. end of text)
};

// Returns prompt + generated tokens. The context fed to the model is the last max_seq_len tokens.
std::vector<int32_t> generate(ZayaModel& model, std::vector<int32_t> prompt,
                              const SampleOptions& opt);

}  // namespace zaya
