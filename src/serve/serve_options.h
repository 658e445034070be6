// zaya serve's options (openai_server.h; `zaya serve`'s flags, docs/commands/serve.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

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
  size_t max_connections = 2048;  // open at once, read by one thread (http_server.h); more: 503
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

}  // namespace zaya::serve
