// zaya serve: an OpenAI-compatible completions server over the continuous-batching engine
// (infer/engine.h), in parts: the HTTP server (http_server.h: zaya's reading and framing, Boost
// Beast's messages), the engine on its thread (engine_host.h), the completions
// (completion_handler.h) and the tokenizer shared by them (tokenizer_service.h).
//
//   POST /v1/completions   prompt, max_tokens, temperature, top_p, stop, seed, stream (server-sent
//                          events); zaya's top_k and repetition_penalty too
//   GET  /v1/models        the one model served
//   GET  /health           200 while serving, 503 while draining
//
// Every complete request is answered on a thread of a bounded pool (http_server.h: deadlines,
// framing, connection cap), which tokenizes, queues the request with the engine and waits for its
// text;
// one engine thread decodes all running requests together. An error inside a request ends that
// request (500, logged), never the process. A
// request's text does not depend on what else runs (the decoder's rows are batch-independent and
// every draw is a function of seed and position), so 16 concurrent clients get what each would
// get alone. Bad requests get OpenAI-style JSON errors with 4xx codes; a full queue gets 429.
// stop() (SIGTERM) answers new requests 503, finishes every request in flight, then closes the
// listening socket, and run() returns.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "infer/engine.h"
#include "model/zaya_model.h"
#include "serve/serve_options.h"
#include "tokenizer/tokenizer.h"

namespace zaya::serve {

class OpenAiServer {
 public:
  OpenAiServer(ZayaModel& model, const Tokenizer& tokenizer, const ServeOptions& options);
  ~OpenAiServer();
  OpenAiServer(const OpenAiServer&) = delete;
  OpenAiServer& operator=(const OpenAiServer&) = delete;

  // Binds the listening socket, this server's alone; returns the port (the chosen one when
  // options.port is 0). Throws naming the address and the reason ("Address already in use").
  int bind();
  // Serves until stop(), then finishes every request in flight and returns. `on_listening` is
  // called once the threads that answer are running (before it, connections wait in the
  // kernel's queue).
  void run(const std::function<void()>& on_listening = {});
  // Drains: new requests get 503 (and /health 503 "draining"); blocks until every request in
  // flight has been answered in full, or options.drain_timeout_s has passed (then the ones left
  // are ended: 503, or a stream cut short), then closes the listening socket, and run() returns.
  // Thread-safe.
  void stop();
  // Completion requests being answered now.
  int in_flight() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zaya::serve
