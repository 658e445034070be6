// Text generation for samples during and after training: temperature + top-k sampling, each draw
// a pure function of (seed, position), decoded against the CCA caches (infer/generate.h).
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
  int32_t drawable = 0;     // ids [0, drawable) may be drawn (0: all; GenerateOptions::drawable)
};

// Returns prompt + generated tokens. The context the model sees is the last max_seq_len tokens.
std::vector<int32_t> generate(ZayaModel& model, std::vector<int32_t> prompt,
                              const SampleOptions& opt);

}  // namespace zaya
