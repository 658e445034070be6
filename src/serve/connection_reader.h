// zaya serve's reading side: one thread reads every open connection's requests with poll(), so
// a client that trickles its head or body (or sends nothing) holds no thread, only its buffer.
// A request read in full (head and body, framing checked: http_framing.h) goes to `dispatch`,
// which hands it to a thread that answers it; the connection then comes back here for its next
// request (keep-alive) or for a lingering close. So 1,000 connections trickling their headers
// leave every answering thread free for /health and completions.
//
// Deadlines: a head within head_deadline_s of its first byte (408), a body within
// body_deadline_s (408), keep_alive_s idle between requests. Bounds: at most max_connections open
// (past it 503 at once), max_head_bytes per head (431), a body's declared length reserved against
// body_budget_bytes (503 at once past it). Errors found here are answered here (a small reply,
// sent without waiting), then the connection lingers and closes.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "serve/http_limits.h"

namespace zaya::serve {

// A request read in full, for a thread to answer.
struct ReadRequest {
  int fd = -1;
  std::string request;         // its head and body
  std::string rest;            // bytes read after it (a pipelined next request)
  int served = 0;              // requests answered on this connection before it
  bool continue_sent = false;  // "100 Continue" went out before its body
};

class ConnectionReader {
 public:
  using Dispatch = std::function<void(ReadRequest)>;
  // `closing` (the server's) ends every wait within 0.2 s once set.
  ConnectionReader(const HttpLimits& limits, Dispatch dispatch, const std::atomic<bool>& closing);
  ~ConnectionReader();
  ConnectionReader(const ConnectionReader&) = delete;
  ConnectionReader& operator=(const ConnectionReader&) = delete;

  // A new connection from the accept loop; past max_connections it is answered 503 at once.
  void add(int fd);
  // A connection whose request was answered: its next request is read, `rest` first.
  void resume(int fd, std::string rest, int served);
  // A connection to close, after a lingering wait for what the client still sends.
  void finish(int fd);
  // Closes every connection held here and stops the thread; later calls just close.
  void stop();
  // Connections open: held here or being answered.
  size_t open() const { return open_; }

 private:
  using Clock = std::chrono::steady_clock;
  enum class Phase { kIdle, kHead, kBody, kLinger };
  struct Conn {
    Phase phase = Phase::kIdle;
    std::string buf;
    Clock::time_point deadline;
    size_t total = 0;     // the request's head + body bytes, once its head is read
    size_t reserved = 0;  // its body's bytes, reserved against the budget
    size_t drained = 0;   // bytes discarded while lingering
    int served = 0;
    bool continue_sent = false;
    bool counted = true;  // among open_ (a connection refused at the cap is not)
  };
  struct Handoff {
    enum class Kind { kAdd, kReject, kResume, kFinish } kind;
    int fd;
    std::string rest;
    int served;
  };

  void loop();
  void take_handoffs();
  void on_readable(int fd, Conn& c);
  void advance(int fd, Conn& c);
  void on_deadline(int fd, Conn& c);
  void answer_error(int fd, int status, const std::string& message);
  void linger(int fd, Conn& c, std::chrono::milliseconds how_long);
  void close_conn(int fd);
  void post(Handoff h);

  HttpLimits limits_;
  Dispatch dispatch_;
  const std::atomic<bool>& closing_;
  std::atomic<size_t> open_{0};
  std::mutex mutex_;  // handoffs_ and stopped_
  std::vector<Handoff> handoffs_;
  bool stopped_ = false;
  int wake_[2] = {-1, -1};               // a pipe: writing a byte wakes poll()
  std::unordered_map<int, Conn> conns_;  // the reader thread's alone
  size_t budget_used_ = 0;               // the reader thread's alone
  std::thread thread_;
};

}  // namespace zaya::serve
