// The completions request reader: what it accepts, and that every bad body is a 4xx ApiError
// naming the field (never another exception, which the server would turn into a 500).
#include <gtest/gtest.h>

#include <string>

#include "serve/completion_request.h"

namespace zaya::serve {
namespace {

CompletionRequest parse(const std::string& body) {
  return parse_completion_request(body, "zaya", 100, 50);
}

// The status and param of the error `body` gets (0 and "" when it parses).
std::pair<int, std::string> error_of(const std::string& body) {
  try {
    parse(body);
    return {0, ""};
  } catch (const ApiError& e) {
    return {e.status, e.param};
  }
}

TEST(CompletionRequest, ReadsEveryField) {
  const CompletionRequest r = parse(
      R"({"model": "zaya", "prompt": ["The jury"], "max_tokens": 7, "temperature": 0.5,
          "top_p": 0.9, "top_k": 3, "repetition_penalty": 1.2, "seed": -4, "stop": "\n",
          "stream": true, "stream_options": {"include_usage": true}, "n": 1, "echo": false,
          "logprobs": null, "frequency_penalty": 0, "presence_penalty": 0.0, "logit_bias": {},
          "user": "u", "best_of": 1, "suffix": null})");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text, "The jury");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 3);
  EXPECT_FLOAT_EQ(r.sampling.repetition_penalty, 1.2f);
  EXPECT_EQ(r.seed, uint64_t(int64_t(-4)));
  EXPECT_EQ(r.stop, std::vector<std::string>{"\n"});
  EXPECT_TRUE(r.stream && r.include_usage);
  const CompletionRequest d = parse(R"({"model": "zaya", "prompt": "x"})");
  EXPECT_EQ(d.max_tokens, 16);  // OpenAI's defaults
  EXPECT_FLOAT_EQ(d.sampling.temperature, 1.0f);
  EXPECT_FALSE(d.seed.has_value());
  EXPECT_FALSE(d.stream);
}

TEST(CompletionRequest, BadBodiesAre4xxNamingTheField) {
  const std::vector<std::tuple<std::string, int, std::string>> cases = {
      {R"({"model": "zaya", "prompt": )", 400, ""},
      {R"({"model": "zaya", "prompt": "x", "seed": 1e318})", 400, ""},  // found by fuzzing
      {R"([1, 2])", 400, ""},
      {R"({"prompt": "x"})", 400, "model"},
      {R"({"model": "zaya"})", 400, "prompt"},
      {R"({"model": "other", "prompt": "x"})", 404, "model"},
      {R"({"model": "zaya", "prompt": "x", "max_token": 3})", 400, "max_token"},
      {R"({"model": "zaya", "prompt": "x", "max_tokens": 101})", 400, "max_tokens"},
      {R"({"model": "zaya", "prompt": "x", "max_tokens": 1.5})", 400, "max_tokens"},
      {R"({"model": "zaya", "prompt": "x", "max_tokens": 18446744073709551615})", 400,
       "max_tokens"},
      {R"({"model": "zaya", "prompt": "x", "temperature": -0.1})", 400, "temperature"},
      {R"({"model": "zaya", "prompt": "x", "temperature": "hot"})", 400, "temperature"},
      {R"({"model": "zaya", "prompt": "x", "top_p": 0})", 400, "top_p"},
      {R"({"model": "zaya", "prompt": "x", "repetition_penalty": 0})", 400, "repetition_penalty"},
      {R"({"model": "zaya", "prompt": "x", "stop": ["a", ""]})", 400, "stop"},
      {R"({"model": "zaya", "prompt": "x", "stop": 3})", 400, "stop"},
      {R"({"model": "zaya", "prompt": 3})", 400, "prompt"},
      {R"({"model": "zaya", "prompt": [], "max_tokens": 1})", 400, "prompt"},
      {R"({"model": "zaya", "prompt": [[1, 50]], "max_tokens": 1})", 400, "prompt[0]"},
      {R"({"model": "zaya", "prompt": [1, -1]})", 400, "prompt"},
      {R"({"model": "zaya", "prompt": [[]]})", 400, "prompt[0]"},
      {R"({"model": "zaya", "prompt": ["a", 3]})", 400, "prompt[1]"},
      {R"({"model": "zaya", "prompt": "x", "max_tokens": 0})", 400, "max_tokens"},
      {R"({"model": "zaya", "prompt": "x", "logprobs": 21})", 400, "logprobs"},
      {R"({"model": "zaya", "prompt": "x", "echo": 1})", 400, "echo"},
      {R"({"model": "zaya", "prompt": ["a", "b"], "stream": true})", 400, "stream"},
      {R"({"model": "zaya", "prompt": "x", "logprobs": 1, "stream": true})", 400, "stream"},
      {R"({"model": "zaya", "prompt": "x", "n": 2})", 400, "n"},
      {R"({"model": "zaya", "prompt": "x", "frequency_penalty": 0.5})", 400, "frequency_penalty"},
      {R"({"model": "zaya", "prompt": "x", "stream": "yes"})", 400, "stream"},
      {R"({"model": "zaya", "prompt": "x", "stream_options": {"include_usage": true}})", 400,
       "stream_options"},
      {R"({"model": "zaya", "prompt": "x", "stream": true, "stream_options": {"x": 1}})", 400,
       "stream_options.x"},
  };
  for (const auto& [body, status, param] : cases) {
    const auto [got_status, got_param] = error_of(body);
    EXPECT_EQ(got_status, status) << body;
    EXPECT_EQ(got_param, param) << body;
  }
}

// lm-evaluation-harness's local-completions payloads: a batch of token-id lists scored with echo.
TEST(CompletionRequest, LmEvalPayloads) {
  const CompletionRequest ll = parse(
      R"({"model": "zaya", "prompt": [[1, 2, 3], [4, 5]], "temperature": 0, "max_tokens": 1,
          "logprobs": 1, "seed": 1234, "echo": true})");
  ASSERT_EQ(ll.prompts.size(), 2u);
  EXPECT_TRUE(ll.prompts[0].is_tokens);
  EXPECT_EQ(ll.prompts[1].tokens, (std::vector<int32_t>{4, 5}));
  EXPECT_TRUE(ll.echo);
  EXPECT_EQ(ll.logprobs, 1);
  const CompletionRequest one =
      parse(R"({"model": "zaya", "prompt": [7, 8], "max_tokens": 0, "echo": true})");
  ASSERT_EQ(one.prompts.size(), 1u);
  EXPECT_EQ(one.prompts[0].tokens, (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(one.max_tokens, 0);
  const CompletionRequest texts =
      parse(R"({"model": "zaya", "prompt": ["a", "b"], "stop": ["\n"]})");
  EXPECT_EQ(texts.prompts.size(), 2u);
  EXPECT_FALSE(texts.prompts[1].is_tokens);
}

TEST(CompletionRequest, ErrorsAreOpenAiErrorObjects) {
  try {
    parse(R"({"model": "zaya", "prompt": "x", "top_p": 2})");
    FAIL() << "top_p 2 accepted";
  } catch (const ApiError& e) {
    const nlohmann::json b = e.body();
    EXPECT_EQ(b["error"]["type"], "invalid_request_error");
    EXPECT_EQ(b["error"]["param"], "top_p");
    EXPECT_TRUE(b["error"]["code"].is_null());
    EXPECT_NE(b["error"]["message"].get<std::string>().find("(0.0, 1.0]"), std::string::npos);
  }
}

// zaya generate's door: the same rules and messages, the model optional, the defaults its own,
// the fields only a server can answer refused by name.
TEST(CompletionRequest, GenerateDoorSameRules) {
  const RequestLimits limits{"zaya", 100, 50};
  CompletionRequest base;
  base.max_tokens = 64;
  base.sampling.temperature = 0.8f;
  const auto gen = [&](const std::string& body) {
    return parse_request_object(nlohmann::json::parse(body), limits, Door::generate, base);
  };
  const CompletionRequest r = gen(R"({"prompt": "x", "top_k": 3})");
  EXPECT_EQ(r.max_tokens, 64);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.8f);
  EXPECT_EQ(r.sampling.top_k, 3);
  const auto message = [&](const std::string& body, Door door) {
    try {
      parse_request_object(nlohmann::json::parse(body), limits, door, base);
    } catch (const ApiError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  for (const char* body : {R"({"model": "zaya", "prompt": "x", "max_tokens": 4294967301})",
                           R"({"model": "zaya", "prompt": "x", "top_k": 4294967297})",
                           R"({"model": "zaya", "prompt": "x", "seed": 1e30})",
                           R"({"model": "zaya", "prompt": "x", "stop": [""]})",
                           R"({"model": "zaya", "prompt": "x", "max_tokens": 99999999999999})",
                           R"({"model": "other", "prompt": "x"})"}) {
    const std::string m = message(body, Door::serve);
    EXPECT_NE(m, "accepted") << body;
    EXPECT_EQ(message(body, Door::generate), m) << body;
  }
  EXPECT_EQ(message(R"({"prompt": "x", "max_tokens": 99999999999999})", Door::generate),
            "'max_tokens': must be in [0, 100], got 99999999999999");
  EXPECT_EQ(message(R"({"prompt": "x"})", Door::generate), "accepted");  // no model: fine here
  EXPECT_EQ(message(R"({"prompt": "x", "echo": true})", Door::generate),
            "'echo': zaya generate cannot answer this field; use zaya serve");
  EXPECT_THROW(parse_request_object(nlohmann::json::parse("{}"), limits, Door::generate, base),
               ApiError);  // the prompt is required unless the caller says otherwise
  EXPECT_NO_THROW(
      parse_request_object(nlohmann::json::parse("{}"), limits, Door::generate, base, false));
}

}  // namespace
}  // namespace zaya::serve
