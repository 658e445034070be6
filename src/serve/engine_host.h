// The inference engine of zaya serve on its own thread (infer/engine.h): it decodes every running
// request together, and a failed step (it should not happen: every request is checked before it
// is queued) ends the requests the engine held with a 500 and starts a fresh engine, so the
// process keeps serving. The requests it holds are kept by id, so that such a failure, or the
// drain deadline, can end them.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "infer/engine.h"
#include "model/zaya_model.h"
#include "serve/completion_channel.h"

namespace zaya::serve {

class EngineHost {
 public:
  EngineHost(ZayaModel& model, const EngineLimits& limits);
  ~EngineHost();  // stops the thread
  EngineHost(const EngineHost&) = delete;
  EngineHost& operator=(const EngineHost&) = delete;

  void start();  // the engine thread
  void stop();   // ends it after its current step
  int64_t context() const { return context_; }

  // Queues `request`, whose text goes to `channel`, among the live requests under a new id (set
  // in channel->id). Throws ApiError: 429 (the queue is full; the response should carry
  // Retry-After), 400 (what the engine refuses), 503 (the engine is restarting).
  void submit(const std::shared_ptr<Channel>& channel, EngineRequest request);
  // A request that ended (or was never queued) leaves the live ones.
  void forget(uint64_t id);
  // Ends every live request: with `error` (they fail, 500), or, when empty, by waking whoever
  // waits on them (the drain deadline: they see the server's `aborting`).
  void end_live(const std::string& error);
  // For /health: requests decoding and waiting.
  int running() const;
  size_t queued() const;

 private:
  void loop();
  void restart();

  ZayaModel& model_;
  EngineLimits limits_;
  int64_t context_ = 0;
  // The engine, rebuilt by the engine thread (under the unique lock) when a step fails; other
  // threads use it under the shared lock.
  mutable std::shared_mutex engine_mutex_;
  std::unique_ptr<InferenceEngine> engine_;
  std::mutex live_mutex_;
  std::unordered_map<uint64_t, std::shared_ptr<Channel>> live_;
  uint64_t next_id_ = 1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace zaya::serve
