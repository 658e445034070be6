// vLLM's tokenizer endpoints, which lm-evaluation-harness probes to use the server's own tokenizer
// (its "remote" tokenizer): POST /tokenize {prompt, add_special_tokens} → {count, max_model_len,
// tokens}, POST /detokenize {tokens} → {prompt}, GET /tokenizer_info → {eos_token, bos_token,
// pad_token, model_max_length, tokenizer_class, vocab_size (the tokenizer's: ids a client can
// send and get back) and model_vocab_size (the model's, larger where its vocabulary is padded)}.
// Bodies are read strictly, as completions are.
#pragma once

#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace zaya::serve {

struct TokenizerEndpoints {
  const Tokenizer& tokenizer;
  std::string served_model;
  int64_t context = 0;  // max_model_len
  int64_t model_vocab_size = 0;

  // Special tokens' text (e.g. "<|endoftext|>") is read as those tokens, as Hugging Face
  // tokenizers do; add_special_tokens (default true, as vLLM) puts the BOS first where the
  // tokenizer has one. Throws ApiError (400; 404 for another model).
  nlohmann::json tokenize(std::string_view body) const;
  nlohmann::json detokenize(std::string_view body) const;
  nlohmann::json info() const;
};

}  // namespace zaya::serve
