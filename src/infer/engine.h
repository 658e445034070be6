// The continuous-batching loop of `zaya serve` and `zaya generate --prompts`: requests wait in a
// bounded queue; each tick() lets in as many as have a free slot and cache blocks (prefilling each
// in one forward and drawing its first token), then decodes one token for every running request
// in one batched step (BatchDecoder), so requests join and leave between steps.
//
// What a request gets does not depend on the others: the decoder's rows are batch-independent
// and every draw is a pure function of (seed, position) (sampling.h). submit() may be called from
// any thread; tick() and the callbacks run on the thread that calls tick().
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "infer/batch_decoder.h"
#include "infer/generate.h"

namespace zaya {

struct EngineResult {
  std::vector<int32_t> tokens;  // drawn tokens (eos included when it ended the request)
  std::string finish_reason;    // "eos", "length" or "stop" (on_token asked to stop)
  double queue_seconds = 0;     // submitted → prefill began
  double ttft_seconds = 0;      // submitted → first token drawn
  double decode_seconds = 0;    // first token → last token
};

struct EngineRequest {
  std::vector<int32_t> prompt;
  GenerateOptions opt;  // sampling, max_new_tokens, eos
  // Each drawn token, in order; return false to end the request here ("stop").
  std::function<bool(int32_t)> on_token;
  // Once, when the request has ended.
  std::function<void(const EngineResult&)> on_done;
  // Optional, for log-probabilities: the logits [prompt.size(), V] of every prompt position right
  // after the prefill, and the logits [V] each token is drawn from, before the draw.
  std::function<void(std::span<const float>)> on_prompt_logits;
  std::function<void(std::span<const float>)> on_draw_logits;
};

// The engine holds at most decoder.max_sequences + max_queue requests: max_sequences decode and
// max_queue more wait (a request submitted while a slot is free counts as decoding, even before
// the engine's next tick admits it). So max_queue 0 refuses only what is beyond the batch.
struct EngineLimits {
  DecoderLimits decoder;  // max_sequences is the batch; capacity the context per request
  size_t max_queue = 64;  // requests that may wait while the batch is full
};

class InferenceEngine {
 public:
  // `comm` (optional) shards every cache over its ranks (tree attention); then every rank must
  // submit the same requests in the same order and tick in step.
  InferenceEngine(ZayaModel& model, const EngineLimits& limits, dist::Communicator* comm = nullptr);

  // Checks the request (throws Error naming the problem: an empty prompt, a prompt plus
  // max_new_tokens beyond the context, bad sampling parameters) and queues it; false when the
  // engine already holds max_sequences + max_queue requests (EngineLimits).
  bool submit(EngineRequest request);
  // One round: admit, then one decode step. Returns whether requests are still queued or running.
  bool tick();
  // Blocks until a request is queued or `timeout` passes.
  void wait_for_work(std::chrono::milliseconds timeout);

  // Requests waiting for a slot (submitted, not yet admitted), and admitted ones not yet ended;
  // either may be read from any thread.
  size_t queued() const;
  int running() const;
  int64_t context() const { return decoder_.capacity(); }
  const BatchDecoder& decoder() const { return decoder_; }
  // Tokens decoded by the batched steps and the time they took (prefills excluded).
  int64_t decoded_tokens() const { return decoded_tokens_; }
  double decode_seconds() const { return decode_seconds_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Running {
    EngineRequest rq;
    int id = -1;
    std::vector<int32_t> context;  // prompt + drawn tokens
    int32_t pending = -1;          // drawn, not yet in the cache
    Clock::time_point submitted, first_token;
    EngineResult result;
  };
  struct Waiting {
    EngineRequest rq;
    Clock::time_point submitted;
  };
  // Draws the next token of `r` from its logits; returns false when the request has ended.
  bool draw(Running& r);
  void finish(Running& r);

  BatchDecoder decoder_;
  EngineLimits limits_;
  mutable std::mutex mutex_;
  std::condition_variable work_;
  std::deque<Waiting> queue_;
  size_t admitted_ = 0;  // taken from the queue and not yet finished (under mutex_)
  std::vector<Running> running_;
  int64_t decoded_tokens_ = 0;
  double decode_seconds_ = 0;
};

}  // namespace zaya
