#include "serve/engine_host.h"

#include <chrono>
#include <cstdio>

#include "core/error.h"
#include "serve/completion_request.h"

namespace zaya::serve {

EngineHost::EngineHost(ZayaModel& model, const EngineLimits& limits)
    : model_(model), limits_(limits), engine_(std::make_unique<InferenceEngine>(model, limits)) {
  context_ = engine_->context();
}

EngineHost::~EngineHost() {
  stop();
}

void EngineHost::start() {
  stop_ = false;
  thread_ = std::thread([this] { loop(); });
}

void EngineHost::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void EngineHost::submit(const std::shared_ptr<Channel>& channel, EngineRequest request) {
  std::shared_lock<std::shared_mutex> lock(engine_mutex_);
  if (!engine_)
    throw ApiError(503, "the engine is restarting after a failure; retry later", {},
                   "server_error");
  {
    std::lock_guard<std::mutex> l2(live_mutex_);
    channel->id = next_id_++;
    live_.emplace(channel->id, channel);
  }
  bool queued = false;
  try {
    queued = engine_->submit(std::move(request));
  } catch (const Error& e) {
    forget(channel->id);
    throw ApiError(400, e.what());
  }
  if (!queued) {
    forget(channel->id);
    throw ApiError(429,
                   "the server is busy: " + std::to_string(limits_.decoder.max_sequences) +
                       " requests are decoding and " + std::to_string(limits_.max_queue) +
                       " waiting (--max-batch, --max-queue); retry later",
                   {}, "rate_limit_error");
  }
}

void EngineHost::forget(uint64_t id) {
  std::lock_guard<std::mutex> lock(live_mutex_);
  live_.erase(id);
}

void EngineHost::end_live(const std::string& error) {
  std::lock_guard<std::mutex> lock(live_mutex_);
  for (const auto& [id, ch] : live_) {
    std::lock_guard<std::mutex> l2(ch->m);
    if (!error.empty() && !ch->done) {
      ch->error = error;
      ch->done = true;
    }
    ch->cv.notify_all();
  }
  if (!error.empty()) live_.clear();
}

int EngineHost::running() const {
  std::shared_lock<std::shared_mutex> lock(engine_mutex_);
  return engine_ ? engine_->running() : 0;
}

size_t EngineHost::queued() const {
  std::shared_lock<std::shared_mutex> lock(engine_mutex_);
  return engine_ ? engine_->queued() : 0;
}

void EngineHost::loop() {
  while (!stop_) {
    try {
      std::shared_lock<std::shared_mutex> lock(engine_mutex_);
      if (!engine_) {
        lock.unlock();
        restart();
      } else if (!engine_->tick()) {
        engine_->wait_for_work(std::chrono::milliseconds(50));
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr,
                   "zaya serve: a decoding step failed (%s); ending the requests it held and "
                   "starting the engine again\n",
                   e.what());
      {
        // No request is queued with the failed engine after the ones ended here (submit
        // answers 503 until the fresh engine is there).
        std::unique_lock<std::shared_mutex> lock(engine_mutex_);
        engine_.reset();
      }
      end_live(std::string("a decoding step failed: ") + e.what());
      restart();
    }
  }
}

void EngineHost::restart() {
  std::unique_lock<std::shared_mutex> lock(engine_mutex_);
  engine_.reset();
  try {
    engine_ = std::make_unique<InferenceEngine>(model_, limits_);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zaya serve: cannot start the engine again (%s); retrying in 1 s\n",
                 e.what());
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

}  // namespace zaya::serve
