#include "serve/tokenizer_endpoints.h"

#include "io/json_limits.h"
#include "serve/completion_request.h"

namespace zaya::serve {

using nlohmann::json;

namespace {

json parse_object(std::string_view body) {
  const std::string too_deep = json_depth_problem(body);
  if (!too_deep.empty()) throw ApiError(400, "the body is JSON " + too_deep);
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw ApiError(400, "the body must be a JSON object");
  return j;
}

// `model` is optional; when given it must be the served one.
void check_model(const json& j, const std::string& served) {
  if (!j.contains("model") || j["model"].is_null()) return;
  if (!j["model"].is_string() || j["model"].get<std::string>() != served)
    throw ApiError(
        404,
        "the model " + j["model"].dump() + " does not exist; this server serves '" + served + "'",
        "model", "invalid_request_error", "model_not_found");
}

void only_fields(const json& j, std::initializer_list<std::string_view> known) {
  for (const auto& [key, v] : j.items())
    if (std::find(known.begin(), known.end(), key) == known.end())
      throw ApiError(400, "unknown field '" + key + "'", key, "invalid_request_error",
                     "unknown_parameter");
}

}  // namespace

json TokenizerEndpoints::tokenize(std::string_view body) const {
  const json j = parse_object(body);
  only_fields(j, {"model", "prompt", "add_special_tokens"});
  check_model(j, served_model);
  if (!j.contains("prompt") || !j["prompt"].is_string())
    throw ApiError(400, "'prompt': required, a string", "prompt");
  bool special = true;
  if (j.contains("add_special_tokens")) {
    if (!j["add_special_tokens"].is_boolean())
      throw ApiError(400, "'add_special_tokens': expected true or false", "add_special_tokens");
    special = j["add_special_tokens"].get<bool>();
  }
  EncodeOptions options;
  options.specials = SpecialTokens::kRecognise;
  options.add_bos = special && tokenizer.bos_id().has_value();
  const std::vector<int32_t> ids = tokenizer.encode(j["prompt"].get<std::string>(), options);
  return {{"count", ids.size()}, {"max_model_len", context}, {"tokens", ids}};
}

json TokenizerEndpoints::detokenize(std::string_view body) const {
  const json j = parse_object(body);
  only_fields(j, {"model", "tokens"});
  check_model(j, served_model);
  if (!j.contains("tokens") || !j["tokens"].is_array())
    throw ApiError(400, "'tokens': required, a list of token ids", "tokens");
  std::vector<int32_t> ids;
  for (const json& t : j["tokens"]) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
        t.get<int64_t>() >= tokenizer.vocab_size())
      throw ApiError(400,
                     "'tokens': token ids must be integers in [0, " +
                         std::to_string(tokenizer.vocab_size()) + "), got " + t.dump(),
                     "tokens");
    ids.push_back(int32_t(t.get<int64_t>()));
  }
  return {{"prompt", tokenizer.decode(ids)}};
}

json TokenizerEndpoints::info() const {
  const auto text = [&](std::optional<int32_t> id) {
    return id ? json(tokenizer.decode(std::span<const int32_t>(&*id, 1))) : json(nullptr);
  };
  return {{"tokenizer_class", "zaya"},
          {"eos_token", text(tokenizer.end_of_text_id())},
          {"bos_token", text(tokenizer.bos_id())},
          {"pad_token", nullptr},
          {"model_max_length", context},
          {"vocab_size", tokenizer.vocab_size()},
          {"model_vocab_size", model_vocab_size}};
}

}  // namespace zaya::serve
