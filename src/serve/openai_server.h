// zaya serve: an OpenAI-compatible completions server over the continuous-batching engine
// (infer/engine.h), on cpp-httplib.
//
//   POST /v1/completions   prompt, max_tokens, temperature, top_p, stop, seed, stream (server-sent
//                          events); zaya's top_k and repetition_penalty too
//   GET  /v1/models        the one model served
//   GET  /health           200 while serving, 503 while draining
//
// Every connection is handled on a thread of a bounded pool (http_guard.h: deadlines, framing,
// connection cap), which tokenizes, queues the request with the engine and waits for its text;
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
#include "tokenizer/tokenizer.h"

namespace zaya::serve {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8000;           // 0: any free port (printed)
  std::string model_name;    // the id clients name in "model"
  int max_batch = 16;        // requests decoded together
  size_t max_queue = 64;     // requests waiting beyond those; more get 429
  int64_t context = 0;       // positions per request, prompt + max_tokens (0: max_seq_len)
  int max_tokens_limit = 0;  // the most max_tokens a request may ask (0: the context)
  size_t max_body_bytes = 1 << 20;
  size_t max_connections = 2048;  // open at once, read by one thread (http_guard.h); more: 503
  size_t http_threads = 256;      // answering complete requests (a stream holds one to its end)
  int drain_timeout_s = 30;       // stop(): how long requests in flight may take to finish
  // A test hook (environment variable ZAYA_SERVE_TEST_FAULT=request:SEED or step:SEED, read by
  // `zaya serve`; docs/commands/serve.md): a completion whose seed is test_fault_seed fails inside
  // the engine at its first token. kRequest: that request ends with 500, as an error inside one
  // request would; kStep: the decoding step fails, every request the engine held ends with 500
  // and the engine starts again.
  enum class TestFault { kNone, kRequest, kStep };
  TestFault test_fault = TestFault::kNone;
  uint64_t test_fault_seed = 0;
};

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
