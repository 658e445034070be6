// Generating a continuation with the decoder: prefill the prompt once, then sample and decode a
// token at a time. When the context outgrows the decoder, the last `capacity` tokens are
// prefilled again for each further token (the model's window, as a training sample sees it).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "infer/decoder.h"
#include "infer/sampling.h"

namespace zaya {

struct GenerateOptions {
  SamplingParams sampling;
  int max_new_tokens = 64;
  int32_t eos = -1;  // generation ends after this token (-1: none)
  // Ids [0, drawable) may be drawn (0: every id the model has). The tokenizer's size where the
  // model's vocabulary is padded past it (ZAYA1: 262,272 rows for Gemma-3's 262,144 tokens), so
  // that no id without a text is ever drawn.
  int32_t drawable = 0;
};

// Whether a model's vocabulary of `model` ids is the padding of a tokenizer's `tokenizer`: larger,
// a multiple of 64 (as Megatron and Zyphra pad it), by less than 1 % (ZAYA1: 262,272 rows for
// Gemma-3's 262,144 tokens). Ids past the tokenizer are then never drawn.
inline bool is_vocabulary_padding(int64_t tokenizer, int64_t model) {
  return tokenizer > 0 && model > tokenizer && model % 64 == 0 && (model - tokenizer) * 100 < model;
}
// The logits a draw may choose from: the first opt.drawable of them when that is set.
std::span<const float> drawable_logits(std::span<const float> logits, const GenerateOptions& opt);

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated tokens only (eos included when it ended the text)
  std::string finish_reason;    // "eos", "length" or "stop" (the callback asked to stop)
  double prefill_seconds = 0;   // prompt forward + the first draw: time to first token
  double decode_seconds = 0;    // every later token
};

// Whether generation ends with `token`, the `drawn`-th token drawn (on_token, if given, is asked
// first): "stop" when on_token says so, "eos" at opt.eos, "length" at opt.max_new_tokens; nullptr
// when it goes on. The one rule of generate_tokens and the batching engine (engine.h).
const char* end_of_generation(int32_t token, int drawn, const GenerateOptions& opt,
                              const std::function<bool(int32_t)>& on_token);

// on_token (optional) sees each token as it is drawn and returns false to stop there (stop
// strings are checked by the caller, who has the tokenizer).
GenerateResult generate_tokens(Decoder& decoder, std::span<const int32_t> prompt,
                               const GenerateOptions& opt,
                               const std::function<bool(int32_t)>& on_token = {});

}  // namespace zaya
