// The completion requests in flight: from their handler's start to the last byte of their
// response. stop() waits on it to drain (openai_server.h).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace zaya::serve {

class RequestFlight {
 public:
  void begin() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++count_;
  }
  void end() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--count_ == 0) cv_.notify_all();
  }
  int count() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return count_;
  }
  // Whether every request ended within `timeout`.
  bool wait_idle(std::chrono::seconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return count_ == 0; });
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  int count_ = 0;
};

// Ends a request's flight when its handler returns, unless disarmed (a stream, whose end ends it).
class FlightGuard {
 public:
  explicit FlightGuard(RequestFlight& flight) : flight_(flight) { flight_.begin(); }
  ~FlightGuard() {
    if (armed_) flight_.end();
  }
  FlightGuard(const FlightGuard&) = delete;
  FlightGuard& operator=(const FlightGuard&) = delete;
  void disarm() { armed_ = false; }

 private:
  RequestFlight& flight_;
  bool armed_ = true;
};

}  // namespace zaya::serve
