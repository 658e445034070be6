// What zaya serve puts in front of cpp-httplib (Debian's 0.11.4) so that no client can stop it:
//
//   - every request's head and body are read by one thread for all connections
//     (connection_reader.h, poll), not by httplib, under deadlines for the whole head and the
//     whole body (httplib 0.11 has only a timeout per read, which a client that trickles a byte a
//     second never trips), then handed to httplib as one buffer on a thread that answers it; so a
//     slow client holds no thread, and 1,000 of them leave /health and completions answered;
//   - framing is checked before anything else: a Content-Length that is not one plain decimal
//     number gets 400 at once, one over the body limit 413 at once (httplib 0.11 answers
//     `Content-Length: -5` with 413 after waiting out its read timeout), a chunked request body
//     411;
//   - at most `max_connections` connections are open at once, and beyond that a connection is
//     answered 503 at once (the count is exact in the order connections arrive; the listen backlog
//     is widened so that the kernel queues a burst instead of dropping its handshakes); complete
//     requests are answered by at most `threads` threads, created when first needed;
//   - keep-alive: at most `keep_alive_max` requests per connection, `keep_alive_s` idle between;
//   - a client that half-closes its side after its request (shutdown(SHUT_WR)) gets its reply: the
//     request is read in full before httplib sees it;
//   - stop_connections() ends every wait within a fraction of a second, so a stopping server does
//     not wait out a slow client.
#pragma once

#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "serve/connection_reader.h"
#include "serve/http_limits.h"

namespace zaya::serve {

// The threads that answer complete requests, started when first needed.
class ConnectionPool {
 public:
  ConnectionPool(size_t max_threads, size_t min_threads);
  ~ConnectionPool();
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

class GuardedServer : public httplib::Server {
 public:
  explicit GuardedServer(const HttpLimits& limits);
  ~GuardedServer() override;
  // For httplib's new_task_queue: starts the reader and the answering threads (throws, saying
  // why, when they cannot be started) and returns the queue httplib's accept loop hands each new
  // connection to (it goes to the reader at once). httplib shuts the queue down when it stops
  // listening, which stops both.
  httplib::TaskQueue* start_connections();
  // Makes every wait for a client end (within ~0.2 s) and every connection close after its
  // current response.
  void stop_connections() { closing_ = true; }
  const HttpLimits& limits() const { return limits_; }
  // After binding: lets the kernel queue as many connections as it allows (SOMAXCONN) while the
  // accept loop is busy. Debian's compiled cpp-httplib listens with a backlog of 5: a burst of
  // connections past it had its handshakes dropped and retried a second or more later, so a
  // connection past the caps waited instead of being answered 503 at once.
  void widen_backlog();

 private:
  class AcceptQueue;
  bool process_and_close_socket(socket_t sock) override;
  void answer(ReadRequest rq);  // on an answering thread
  void stop_threads();
  HttpLimits limits_;
  std::atomic<bool> closing_{false};
  std::unique_ptr<ConnectionPool> pool_;
  std::unique_ptr<ConnectionReader> reader_;
};

// Why `host:port` cannot be bound: the error of a plain bind() of it, as the kernel says it
// ("Address already in use").
std::string bind_error(const std::string& host, int port);

}  // namespace zaya::serve
