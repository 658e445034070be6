#include "serve/answer_pool.h"

#include <algorithm>
#include <system_error>

#include "core/error.h"

namespace zaya::serve {

AnswerPool::AnswerPool(size_t max_threads, size_t min_threads)
    : max_threads_(std::max<size_t>(max_threads, 1)) {
  size_t started = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    while (started < std::min(min_threads, max_threads_) && spawn()) ++started;
  }
  if (started < std::min(min_threads, max_threads_)) {
    shutdown();
    ZAYA_FAIL("zaya serve: cannot start the threads that answer requests (", started, " of ",
              min_threads,
              " started): lower --max-batch or --context, or raise the "
              "address-space limit (ulimit -v)");
  }
}

AnswerPool::~AnswerPool() {
  shutdown();
}

bool AnswerPool::spawn() {
  try {
    threads_.emplace_back([this] { work(); });
    return true;
  } catch (const std::system_error&) {
    return false;
  }
}

size_t AnswerPool::threads() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return threads_.size();
}

void AnswerPool::enqueue(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mutex_);
  // A thread more when none is idle for this job, up to the cap; else the job waits. (A failed
  // start leaves it to the running threads.)
  if (idle_ <= jobs_.size() && threads_.size() < max_threads_) spawn();
  jobs_.push_back(std::move(fn));
  cv_.notify_one();
}

void AnswerPool::work() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ++idle_;
      cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      --idle_;
      if (jobs_.empty()) return;
      fn = std::move(jobs_.front());
      jobs_.pop_front();
    }
    fn();
  }
}

void AnswerPool::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

}  // namespace zaya::serve
