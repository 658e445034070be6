#include "serve/completion_request.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "io/json_limits.h"

namespace zaya::serve {

using nlohmann::json;

json ApiError::body() const {
  return json{{"error",
               {{"message", what()},
                {"type", type},
                {"param", param.empty() ? json(nullptr) : json(param)},
                {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

namespace {

ApiError bad(const std::string& field, const std::string& message) {
  return ApiError(400, "'" + field + "': " + message, field);
}

// What a value of the wrong type was, for the message: numbers and short strings as given.
std::string shown(const json& v) {
  if (v.is_number()) return v.dump();
  if (v.is_string() && v.get_ref<const std::string&>().size() <= 40)
    return "the string " + v.dump(-1, ' ', false, json::error_handler_t::replace);
  return v.type_name();
}

double number(const json& v, const std::string& field, double lo, double hi, bool lo_open) {
  if (!v.is_number()) throw bad(field, "expected a number, got " + shown(v));
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi || (lo_open && x == lo))
    throw bad(field, std::string("must be in ") + (lo_open ? "(" : "[") + json(lo).dump() + ", " +
                         json(hi).dump() + "], got " + v.dump());
  return x;
}

int64_t integer(const json& v, const std::string& field, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) throw bad(field, "expected an integer, got " + shown(v));
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    throw bad(field, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                         v.dump());
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi)
    throw bad(field, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                         v.dump());
  return x;
}

// Fields OpenAI defines that this server does not implement: accepted at their neutral value only.
void neutral(const json& v, const std::string& field, const json& neutral_value) {
  if (v.is_null() || v == neutral_value) return;
  throw bad(field, "only " + neutral_value.dump() + " is supported by this server");
}

}  // namespace

std::vector<PromptInput> parse_prompts(const json& v, int64_t vocab_size) {
  const auto token_list = [&](const json& list, const std::string& where) {
    PromptInput p{true, {}, {}};
    if (list.empty()) throw bad(where, "a prompt of token ids may not be empty");
    for (const json& t : list) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= vocab_size)
        throw bad(where, "token ids must be integers in [0, " + std::to_string(vocab_size) +
                             "), got " + t.dump());
      p.tokens.push_back(int32_t(t.get<int64_t>()));
    }
    return p;
  };
  std::vector<PromptInput> out;
  if (v.is_string()) return {PromptInput{false, v.get<std::string>(), {}}};
  if (!v.is_array() || v.empty())
    throw bad("prompt",
              "expected a string, a list of strings, a list of token ids or a list of "
              "token-id lists");
  if (v[0].is_number()) return {token_list(v, "prompt")};
  if (v.size() > kMaxPromptsPerRequest)
    throw bad("prompt", "at most " + std::to_string(kMaxPromptsPerRequest) +
                            " prompts per request, got " + std::to_string(v.size()));
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string where = "prompt[" + std::to_string(i) + "]";
    if (v[i].is_string()) {
      out.push_back(PromptInput{false, v[i].get<std::string>(), {}});
    } else if (v[i].is_array()) {
      out.push_back(token_list(v[i], where));
    } else {
      throw bad(where, "expected a string or a list of token ids");
    }
  }
  return out;
}

CompletionRequest parse_completion_request(std::string_view body, const std::string& served_model,
                                           int max_tokens_limit, int64_t vocab_size) {
  // A body nested 100,000 deep would be built, and its destruction overflow the stack.
  const std::string too_deep = json_depth_problem(body);
  if (!too_deep.empty()) throw ApiError(400, "the body is JSON " + too_deep);
  json j;
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers like 1e999
    throw ApiError(400, std::string("the body is not valid JSON: ") + e.what());
  }
  return parse_request_object(j, RequestLimits{served_model, max_tokens_limit, vocab_size},
                              Door::serve, CompletionRequest{});
}

namespace {

std::vector<std::string> stop_strings(const json& v, const std::string& key) {
  std::vector<std::string> stop;
  if (v.is_string()) {
    stop = {v.get<std::string>()};
  } else if (v.is_array()) {
    if (v.size() > 4) throw bad(key, "at most 4 stop strings, got " + std::to_string(v.size()));
    for (const json& s : v) {
      if (!s.is_string()) throw bad(key, "expected strings");
      stop.push_back(s.get<std::string>());
    }
  } else if (!v.is_null()) {
    throw bad(key, "expected a string or an array of strings");
  }
  for (const std::string& s : stop)
    if (s.empty()) throw bad(key, "a stop string may not be empty");
  return stop;
}

// The fields only the server can answer (a list of choices, echo, logprobs, a stream).
bool serve_only(const std::string& key) {
  return key == "stream" || key == "stream_options" || key == "echo" || key == "logprobs";
}

// One field of a request into `r`; false when `key` is not a field of a completion request.
bool read_field(const std::string& key, const json& v, const RequestLimits& limits,
                CompletionRequest& r) {
  if (key == "model") {
    if (!v.is_string()) throw bad(key, "expected a string");
    r.model = v.get<std::string>();
  } else if (key == "prompt") {
    r.prompts = parse_prompts(v, limits.vocab_size);
  } else if (key == "max_tokens") {
    if (!v.is_null()) r.max_tokens = int(integer(v, key, 0, limits.max_tokens_limit));
  } else if (key == "temperature") {
    if (!v.is_null()) r.sampling.temperature = float(number(v, key, 0, 2, false));
  } else if (key == "top_p") {
    if (!v.is_null()) r.sampling.top_p = float(number(v, key, 0, 1, true));
  } else if (key == "top_k") {
    if (!v.is_null()) r.sampling.top_k = int(integer(v, key, 0, std::numeric_limits<int>::max()));
  } else if (key == "repetition_penalty") {
    if (!v.is_null()) r.sampling.repetition_penalty = float(number(v, key, 0, 100, true));
  } else if (key == "seed") {
    if (!v.is_null())
      r.seed = uint64_t(integer(v, key, std::numeric_limits<int64_t>::min(),
                                std::numeric_limits<int64_t>::max()));
  } else if (key == "stop") {
    r.stop = stop_strings(v, key);
  } else if (key == "stream") {
    if (!v.is_boolean() && !v.is_null()) throw bad(key, "expected true or false");
    r.stream = v.is_boolean() && v.get<bool>();
  } else if (key == "stream_options") {
    if (v.is_null()) return true;
    if (!v.is_object()) throw bad(key, "expected an object");
    for (const auto& [k2, v2] : v.items()) {
      if (k2 != "include_usage") throw bad(key + "." + k2, "unknown field");
      if (!v2.is_boolean()) throw bad(key + "." + k2, "expected true or false");
      r.include_usage = v2.get<bool>();
    }
  } else if (key == "user") {
    if (!v.is_string() && !v.is_null()) throw bad(key, "expected a string");
  } else if (key == "n" || key == "best_of") {
    neutral(v, key, 1);
  } else if (key == "echo") {
    if (!v.is_boolean() && !v.is_null()) throw bad(key, "expected true or false");
    r.echo = v.is_boolean() && v.get<bool>();
  } else if (key == "logprobs") {
    if (!v.is_null()) r.logprobs = int(integer(v, key, 0, kMaxLogprobs));
  } else if (key == "suffix") {
    neutral(v, key, nullptr);
  } else if (key == "frequency_penalty" || key == "presence_penalty") {
    if (!v.is_null()) number(v, key, -2, 2, false);
    neutral(v, key, 0);
  } else if (key == "logit_bias") {
    neutral(v, key, json::object());
  } else {
    return false;
  }
  return true;
}

}  // namespace

CompletionRequest parse_request_object(const json& j, const RequestLimits& limits, Door door,
                                       CompletionRequest r, bool prompt_required) {
  if (!j.is_object()) throw ApiError(400, "the body must be a JSON object");
  for (const auto& [key, v] : j.items()) {
    if (door == Door::generate && serve_only(key) && !v.is_null() && v != false)
      throw bad(key, "zaya generate cannot answer this field; use zaya serve");
    if (!read_field(key, v, limits, r))
      throw ApiError(400, "unknown field '" + key + "'", key, "invalid_request_error",
                     "unknown_parameter");
  }
  const bool have_model = j.contains("model"), have_prompt = j.contains("prompt");
  if (door == Door::serve && !have_model) throw bad("model", "required");
  if (prompt_required && !have_prompt) throw bad("prompt", "required");
  if (have_model && r.model != limits.served_model)
    throw ApiError(404,
                   "the model '" + r.model + "' does not exist; this server serves '" +
                       limits.served_model + "'",
                   "model", "invalid_request_error", "model_not_found");
  if (r.max_tokens == 0 && !r.echo)
    throw bad("max_tokens", "must be >= 1 (0 only with echo: the prompt scored, nothing drawn)");
  if (r.stream && (r.prompts.size() != 1 || r.echo || r.logprobs))
    throw bad("stream", "a stream answers one prompt without echo or logprobs");
  if (r.stream == false && r.include_usage)
    throw bad("stream_options", "only allowed when 'stream' is true");
  return r;
}

std::vector<int32_t> prompt_token_ids(const Tokenizer& tok, const PromptInput& p, int max_tokens,
                                      int64_t context, const std::string& field) {
  std::vector<int32_t> ids = p.is_tokens ? p.tokens : tok.encode(p.text);
  if (ids.empty()) throw ApiError(400, "'" + field + "': encodes to no tokens", field);
  const int64_t draws = std::max(max_tokens, 1);
  if (int64_t(ids.size()) + draws > context)
    throw ApiError(400,
                   "this model's context is " + std::to_string(context) +
                       " tokens; the prompt has " + std::to_string(ids.size()) +
                       " and max_tokens asks for " + std::to_string(draws) +
                       ": shorten the prompt or lower max_tokens",
                   field, "invalid_request_error", "context_length_exceeded");
  return ids;
}

}  // namespace zaya::serve
