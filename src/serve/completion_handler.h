// POST /v1/completions (openai_server.h): the request parsed (completion_request.h), each prompt
// queued with the engine host with a channel for its text (completion_channel.h), and the answer
// written as one JSON object or as server-sent events.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/completion_channel.h"
#include "serve/completion_request.h"
#include "serve/engine_host.h"
#include "serve/http_message.h"
#include "serve/request_flight.h"
#include "serve/serve_metrics.h"
#include "serve/tokenizer_service.h"

namespace zaya::serve {

struct ServeOptions;

// What the server's state says to a request: whether new ones are refused (draining) and whether
// those in flight must end (aborting: the drain deadline passed).
struct ServerState {
  std::atomic<bool> draining{false}, aborting{false};
};

class CompletionHandler {
 public:
  CompletionHandler(EngineHost& engine, const TokenizerService& tokenizer,
                    const ServeOptions& options, int64_t model_vocab, RequestFlight& flight,
                    const ServerState& state, ServeMetrics& metrics);
  void operator()(const HttpRequest& request, HttpResponse& response);

 private:
  std::vector<int32_t> prompt_ids(const PromptInput& p, int max_tokens, const std::string& field);
  EngineRequest engine_request(const std::shared_ptr<Channel>& ch,
                               const std::vector<int32_t>& prompt, const CompletionRequest& cr);
  void fail(Channel& ch, const std::string& what);
  bool on_token(Channel& ch, int32_t t);
  void on_done(Channel& ch, const EngineResult& r);
  nlohmann::json choice_json(size_t index, const Channel& ch, const PromptInput& p,
                             const std::vector<int32_t>& prompt, const CompletionRequest& cr);
  void answer_batch(const CompletionRequest& cr, HttpResponse& res,
                    std::chrono::steady_clock::time_point t0);
  // Queues one prompt; a full queue's 429 carries Retry-After.
  void submit(const std::shared_ptr<Channel>& ch, EngineRequest er, HttpResponse& res);

  EngineHost& engine_;
  const TokenizerService& tokenizer_;
  const ServeOptions& opt_;
  int64_t model_vocab_;
  RequestFlight& flight_;
  const ServerState& state_;
  ServeMetrics& metrics_;
  int max_tokens_limit_;
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace zaya::serve
