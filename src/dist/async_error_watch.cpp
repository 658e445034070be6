#include "dist/async_error_watch.h"

#include <chrono>

#include "core/error.h"

namespace zaya::dist {

AsyncErrorWatch::AsyncErrorWatch(std::function<std::string()> poll, std::function<void()> abort,
                                 double interval_s)
    : poll_(std::move(poll)), abort_(std::move(abort)), interval_s_(interval_s) {
  thread_ = std::thread([this] { run(); });
}

AsyncErrorWatch::~AsyncErrorWatch() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void AsyncErrorWatch::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_ && error_.empty()) {
    wake_.wait_for(lock, std::chrono::duration<double>(interval_s_), [this] { return stopping_; });
    if (stopping_) return;
    lock.unlock();
    std::string e = poll_();
    lock.lock();
    if (e.empty()) continue;
    error_ = std::move(e);
    lock.unlock();
    abort_();  // ends the spinning kernels: the host's wait on the stream returns
    return;
  }
}

void AsyncErrorWatch::check(const char* call) {
  const std::string e = error();
  ZAYA_CHECK(e.empty(), call, ": the device communicator reported an error and was aborted: ", e,
             " (a peer that died or a network failure; the run must restart)");
}

std::string AsyncErrorWatch::error() {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

}  // namespace zaya::dist
