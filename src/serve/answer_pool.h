// The threads that answer complete requests (serve/http_server.h), started when first needed, up
// to a cap: a request waiting on the engine holds one, a connection being read holds none.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace zaya::serve {

class AnswerPool {
 public:
  // Starts min_threads now (throws, saying what to lower, when the system refuses them).
  AnswerPool(size_t max_threads, size_t min_threads);
  ~AnswerPool();
  AnswerPool(const AnswerPool&) = delete;
  AnswerPool& operator=(const AnswerPool&) = delete;
  void enqueue(std::function<void()> fn);
  void shutdown();  // runs the jobs queued, then joins
  size_t threads() const;

 private:
  void work();
  bool spawn();  // false when no thread could be started
  size_t max_threads_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;  // threads waiting for a job
  bool stopping_ = false;
};

}  // namespace zaya::serve
