// The body of an OpenAI `POST /v1/completions` request, read strictly: every field checked for its
// type and range, unknown fields refused (a misspelt `max_token` must not silently become the
// default), and OpenAI-style errors ({"error": {"message", "type", "param", "code"}}) with the
// field named.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "infer/sampling.h"

namespace zaya::serve {

// An error for the client: its HTTP status and the OpenAI error object.
struct ApiError : std::runtime_error {
  int status;
  std::string type, param, code;
  ApiError(int status, std::string message, std::string param = {},
           std::string type = "invalid_request_error", std::string code = {})
      : std::runtime_error(std::move(message)),
        status(status),
        type(std::move(type)),
        param(std::move(param)),
        code(std::move(code)) {}
  nlohmann::json body() const;
};

// One prompt of a request: text, or token ids (lm-evaluation-harness sends ids).
struct PromptInput {
  bool is_tokens = false;
  std::string text;
  std::vector<int32_t> tokens;
};

// The most log-probabilities per position a request may ask for (`logprobs`), as vLLM's default.
inline constexpr int kMaxLogprobs = 20;
// The most prompts one request may hold (a batch: a list of strings or of token-id lists).
inline constexpr size_t kMaxPromptsPerRequest = 64;

struct CompletionRequest {
  std::string model;
  // A string, a list of strings, a list of token ids or a list of token-id lists: one choice each.
  std::vector<PromptInput> prompts;
  int max_tokens = 16;  // OpenAI's default; 0 only with echo (the prompt scored, nothing drawn)
  bool echo = false;    // the prompt's text (and with logprobs its tokens) before the completion
  std::optional<int> logprobs;  // per token: its log-probability and the top N (0..kMaxLogprobs)
  SamplingParams sampling;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;  // at most 4, as OpenAI
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with the usage
};

// Parses and checks `body`. `served_model` is the one model id this server answers to (404
// otherwise); `max_tokens_limit` the most a request may ask for; `vocab_size` bounds token ids.
CompletionRequest parse_completion_request(std::string_view body, const std::string& served_model,
                                           int max_tokens_limit, int64_t vocab_size);

// A prompt field: a string, a list of strings, a list of token ids or a list of token-id lists.
std::vector<PromptInput> parse_prompts(const nlohmann::json& v, int64_t vocab_size);

}  // namespace zaya::serve
