// What zaya serve puts in front of cpp-httplib (Debian's 0.11.4) so that no client can stop it:
//
//   - every request's head and body are read by this file, not by httplib, under deadlines for the
//     whole head and the whole body (httplib 0.11 has only a timeout per read, which a client that
//     trickles a byte a second never trips), then handed to httplib as one buffer;
//   - framing is checked before anything else: a Content-Length that is not one plain decimal
//     number gets 400 at once, one over the body limit 413 at once (httplib 0.11 answers
//     `Content-Length: -5` with 413 after waiting out its read timeout), a chunked request body
//     411;
//   - connections are served by at most `max_connections` threads, created when first needed (not
//     one per --max-queue slot at start); up to as many more wait for a thread, and beyond that a
//     connection is answered 503 at once on a thread of its own (the count is exact, however a
//     burst of connections meets the threads' wake-ups; the listen backlog is widened so that the
//     kernel queues a burst instead of dropping its handshakes);
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
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "serve/http_framing.h"

namespace zaya::serve {

struct HttpLimits {
  int head_deadline_s = 10;  // from a request's first byte to the end of its head
  int body_deadline_s = 30;  // for the whole body
  int keep_alive_s = 5;      // idle between requests on one connection
  int keep_alive_max = 100;  // requests per connection
  int write_timeout_s = 10;  // without progress while writing a response
  size_t max_head_bytes = 16 << 10;
  size_t max_body_bytes = 1 << 20;
  size_t max_connections = 256;  // served at once, one thread each
};

// The thread pool behind httplib's accept loop (httplib::TaskQueue).
class ConnectionPool : public httplib::TaskQueue {
 public:
  ConnectionPool(size_t max_threads, size_t min_threads);
  ~ConnectionPool() override;
  void enqueue(std::function<void()> fn) override;
  void shutdown() override;
  size_t threads() const;

 private:
  void work();
  void reject_loop();
  bool spawn();  // false when no thread could be started
  size_t max_threads_;
  mutable std::mutex mutex_;
  std::condition_variable cv_, reject_cv_;
  std::deque<std::function<void()>> jobs_, rejects_;
  std::vector<std::thread> threads_;
  std::thread rejecter_;
  size_t idle_ = 0;  // threads waiting for a job
  size_t busy_ = 0;  // threads answering a connection
  bool stopping_ = false;
};

class GuardedServer : public httplib::Server {
 public:
  explicit GuardedServer(const HttpLimits& limits);
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
  bool process_and_close_socket(socket_t sock) override;
  HttpLimits limits_;
  std::atomic<bool> closing_{false};
};

// Why `host:port` cannot be bound: the error of a plain bind() of it, as the kernel says it
// ("Address already in use").
std::string bind_error(const std::string& host, int port);

}  // namespace zaya::serve
