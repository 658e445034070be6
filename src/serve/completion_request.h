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
#include "tokenizer/tokenizer.h"

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

// The front door a request came through. Both read the same fields with the same rules and the same
// messages; `generate` cannot answer echo, logprobs or a stream and refuses those fields, and takes
// `model` as optional (serve requires it).
enum class Door { serve, generate };

// What a request is checked against: the model it must name, the largest max_tokens, the
// vocabulary its token ids must fall in (the tokenizer's: the padding ids of a padded model
// vocabulary have no text).
struct RequestLimits {
  std::string served_model;
  int max_tokens_limit = 0;
  int64_t vocab_size = 0;
};

// Reads the request object `j` over `base` (the defaults: OpenAI's for serve, the command line's
// for generate); with `prompt_required` false (generate's flags without a prompt) the prompt may be
// absent. Throws ApiError naming the field.
CompletionRequest parse_request_object(const nlohmann::json& j, const RequestLimits& limits,
                                       Door door, CompletionRequest base,
                                       bool prompt_required = true);

// The token ids of one prompt (text encoded with `tok`), checked against `context` with
// `max_tokens` to draw (at least one: echo with max_tokens 0 still draws one, unreported). The
// caller holds whatever lock the tokenizer needs.
std::vector<int32_t> prompt_token_ids(const Tokenizer& tok, const PromptInput& p, int max_tokens,
                                      int64_t context, const std::string& field);

// Parses and checks `body`. `served_model` is the one model id this server answers to (404
// otherwise); `max_tokens_limit` the most a request may ask for; `vocab_size` bounds token ids.
CompletionRequest parse_completion_request(std::string_view body, const std::string& served_model,
                                           int max_tokens_limit, int64_t vocab_size);

// A prompt field: a string, a list of strings, a list of token ids or a list of token-id lists.
std::vector<PromptInput> parse_prompts(const nlohmann::json& v, int64_t vocab_size);

}  // namespace zaya::serve
