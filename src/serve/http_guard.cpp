#include "serve/http_guard.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <system_error>

#include "core/error.h"
#include "serve/completion_request.h"

namespace zaya::serve {

namespace {

using Clock = std::chrono::steady_clock;

// Connections handed to the pool's rejecting thread are answered 503 at once.
thread_local bool t_reject = false;
// The rejecting thread lingers after its 503 only while few connections wait for it: a flood of
// connections past the caps is answered at once, without the lingering close.
thread_local bool t_reject_hurry = false;
constexpr size_t kRejectsLingered = 16;

// Waits until `fd` is ready for `events`, `deadline` passes or `closing` is set; 1 when ready.
int wait_io(int fd, short events, Clock::time_point deadline, const std::atomic<bool>& closing) {
  for (;;) {
    if (closing) return 0;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return 0;
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, int(std::min<long long>(left, 200)));
    if (r > 0) return 1;
    if (r < 0 && errno != EINTR) return -1;
  }
}

bool send_all(int fd, const char* p, size_t n, int timeout_s, const std::atomic<bool>& closing) {
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      p += k;
      n -= size_t(k);
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) &&
        wait_io(fd, POLLOUT, Clock::now() + std::chrono::seconds(timeout_s), closing) > 0)
      continue;
    return false;
  }
  return true;
}

const char* reason(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 431:
      return "Request Header Fields Too Large";
    default:
      return "Service Unavailable";
  }
}

// An error answered before httplib sees the request; the connection closes after it.
void answer_error(int fd, int status, const std::string& message,
                  const std::atomic<bool>& closing) {
  const std::string body =
      ApiError(status, message, {}, status >= 500 ? "server_error" : "invalid_request_error")
          .body()
          .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const std::string out =
      "HTTP/1.1 " + std::to_string(status) + " " + reason(status) +
      "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\nConnection: close\r\n\r\n" + body;
  std::fprintf(stderr, "zaya serve: %d before routing: %s\n", status, message.c_str());
  send_all(fd, out.data(), out.size(), 2, closing);
}

enum class Read { ok, closed, timeout, too_large };

// Reads from `fd` into `buf` until `done(buf)` says where the wanted bytes end, by `deadline`.
template <typename Done>
Read read_until(int fd, std::string& buf, Done done, size_t max_bytes, Clock::time_point deadline,
                const std::atomic<bool>& closing) {
  char chunk[16384];
  while (!done(buf)) {
    if (buf.size() > max_bytes) return Read::too_large;
    const int w = wait_io(fd, POLLIN, deadline, closing);
    if (w < 0) return Read::closed;
    if (w == 0) return Read::timeout;
    const ssize_t k = ::recv(fd, chunk, sizeof chunk, 0);
    if (k == 0) return Read::closed;
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return Read::closed;
    }
    buf.append(chunk, size_t(k));
  }
  return Read::ok;
}

// Where a request head ends in `buf` (after its blank line), or npos.
size_t head_end(const std::string& buf) {
  const size_t crlf = buf.find("\r\n\r\n"), lf = buf.find("\n\n");
  if (crlf == std::string::npos && lf == std::string::npos) return std::string::npos;
  if (lf == std::string::npos || (crlf != std::string::npos && crlf < lf)) return crlf + 4;
  return lf + 2;
}

// One request, already read in full, for httplib; responses go straight to the socket.
class RequestStream : public httplib::Stream {
 public:
  RequestStream(int fd, std::string request, const HttpLimits& limits,
                const std::atomic<bool>& closing, bool sent_continue)
      : fd_(fd),
        data_(std::move(request)),
        limits_(limits),
        closing_(closing),
        swallow_continue_(sent_continue) {}
  bool is_readable() const override { return pos_ < data_.size(); }
  bool is_writable() const override {
    return wait_io(fd_, POLLOUT, Clock::now() + std::chrono::seconds(limits_.write_timeout_s),
                   closing_) > 0;
  }
  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min(size, data_.size() - pos_);
    std::copy_n(data_.data() + pos_, n, ptr);
    pos_ += n;
    return ssize_t(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    // This file already answered "Expect: 100-continue" before reading the body.
    constexpr std::string_view kContinue = "HTTP/1.1 100 Continue";
    if (swallow_continue_ && std::string_view(ptr, size).starts_with(kContinue)) {
      swallow_continue_ = false;
      return ssize_t(size);
    }
    return send_all(fd_, ptr, size, limits_.write_timeout_s, closing_) ? ssize_t(size) : -1;
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    address(::getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    address(::getsockname, ip, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  template <typename Get>
  void address(Get get, std::string& ip, int& port) const {
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    char text[INET6_ADDRSTRLEN] = {};
    if (get(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) return;
    if (a.ss_family == AF_INET) {
      const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
      ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
      port = ntohs(v4->sin_port);
    } else if (a.ss_family == AF_INET6) {
      const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
      ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
      port = ntohs(v6->sin6_port);
    }
    ip = text;
  }
  int fd_;
  std::string data_;
  size_t pos_ = 0;
  const HttpLimits& limits_;
  const std::atomic<bool>& closing_;
  bool swallow_continue_;
};

}  // namespace

ConnectionPool::ConnectionPool(size_t max_threads, size_t min_threads)
    : max_threads_(std::max<size_t>(max_threads, 1)) {
  size_t started = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    try {
      rejecter_ = std::thread([this] { reject_loop(); });
    } catch (const std::system_error&) {
      min_threads = 1;  // spawn() below fails too, and says so
    }
    while (started < std::min(min_threads, max_threads_) && spawn()) ++started;
  }
  if (started < std::min(min_threads, max_threads_)) {
    shutdown();
    ZAYA_FAIL("zaya serve: cannot start the threads that answer connections (", started, " of ",
              min_threads,
              " started): lower --max-batch or --context, or raise the "
              "address-space limit (ulimit -v)");
  }
}

ConnectionPool::~ConnectionPool() {
  shutdown();
}

bool ConnectionPool::spawn() {
  try {
    threads_.emplace_back([this] { work(); });
    return true;
  } catch (const std::system_error&) {
    return false;
  }
}

size_t ConnectionPool::threads() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return threads_.size();
}

void ConnectionPool::enqueue(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Held = being answered + waiting for a thread, counted under the one lock: the cap must not
  // depend on how soon woken threads run (a burst accepted before any thread woke once let
  // through more than the cap, and rejected connections below it).
  if (busy_ + jobs_.size() < 2 * max_threads_) {
    if (idle_ <= jobs_.size() && threads_.size() < max_threads_) spawn();  // else it waits
    jobs_.push_back(std::move(fn));
    cv_.notify_one();
    return;
  }
  rejects_.push_back(std::move(fn));
  reject_cv_.notify_one();
}

void ConnectionPool::work() {
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
      ++busy_;
    }
    fn();
    std::lock_guard<std::mutex> lock(mutex_);
    --busy_;
  }
}

void ConnectionPool::reject_loop() {
  t_reject = true;
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      reject_cv_.wait(lock, [&] { return stopping_ || !rejects_.empty(); });
      if (rejects_.empty()) return;
      fn = std::move(rejects_.front());
      rejects_.pop_front();
      t_reject_hurry = rejects_.size() >= kRejectsLingered;
    }
    fn();
  }
}

void ConnectionPool::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ && threads_.empty() && !rejecter_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  reject_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  if (rejecter_.joinable()) rejecter_.join();
}

GuardedServer::GuardedServer(const HttpLimits& limits) : limits_(limits) {
  set_payload_max_length(limits.max_body_bytes);
  set_write_timeout(limits.write_timeout_s);
  // The port is this server's alone: SO_REUSEADDR (a restart need not wait out TIME_WAIT) but not
  // httplib's default SO_REUSEPORT, under which a second server would share the port.
  set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
}

void GuardedServer::widen_backlog() {
  // listen() again on a listening socket changes only its backlog.
  if (::listen(svr_sock_, SOMAXCONN) != 0)
    std::fprintf(stderr, "zaya serve: cannot widen the listen backlog: %s\n", std::strerror(errno));
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
  try {
    if (t_reject) {
      answer_error(sock, 503,
                   "the server has " + std::to_string(limits_.max_connections) +
                       " connections open and as many waiting; retry later",
                   closing_);
    } else {
      std::string buf;  // bytes read and not yet handed on (a pipelined next request)
      for (int n = 0; n < limits_.keep_alive_max && !closing_; ++n) {
        const int wait_s = n == 0 ? limits_.head_deadline_s : limits_.keep_alive_s;
        if (buf.empty() &&
            wait_io(sock, POLLIN, Clock::now() + std::chrono::seconds(wait_s), closing_) <= 0)
          break;
        const auto head_deadline = Clock::now() + std::chrono::seconds(limits_.head_deadline_s);
        Read r = read_until(
            sock, buf, [](const std::string& b) { return head_end(b) != std::string::npos; },
            limits_.max_head_bytes, head_deadline, closing_);
        if (r == Read::timeout && !closing_)
          answer_error(sock, 408,
                       "the request head did not arrive within " +
                           std::to_string(limits_.head_deadline_s) + " s",
                       closing_);
        if (r == Read::too_large)
          answer_error(
              sock, 431,
              "the request head is over " + std::to_string(limits_.max_head_bytes) + " bytes",
              closing_);
        if (r != Read::ok) break;
        const size_t head = head_end(buf);
        const Framing f =
            check_framing(std::string_view(buf).substr(0, head), limits_.max_body_bytes);
        if (f.status != 0) {
          answer_error(sock, f.status, f.message, closing_);
          break;
        }
        const size_t total = head + f.body_bytes;
        if (f.expect_continue && buf.size() < total) {
          constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
          send_all(sock, kContinue.data(), kContinue.size(), limits_.write_timeout_s, closing_);
        }
        r = read_until(
            sock, buf, [total](const std::string& b) { return b.size() >= total; },
            std::max(total, limits_.max_head_bytes),
            Clock::now() + std::chrono::seconds(limits_.body_deadline_s), closing_);
        if (r == Read::timeout && !closing_)
          answer_error(sock, 408,
                       "the request body did not arrive within " +
                           std::to_string(limits_.body_deadline_s) + " s",
                       closing_);
        if (r != Read::ok) break;
        RequestStream strm(sock, buf.substr(0, total), limits_, closing_, f.expect_continue);
        buf.erase(0, total);
        const bool last = n + 1 == limits_.keep_alive_max || closing_;
        bool connection_closed = false;
        process_request(strm, last, connection_closed, {});
        if (connection_closed || last) break;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zaya serve: connection dropped: %s\n", e.what());
  }
  // A lingering close: the client may still be sending (a body refused unread, or the request a
  // 503 was answered before it arrived); closing with unread bytes resets the connection, and the
  // reset can destroy the reply before the client reads it. The rejecting thread lingers briefly
  // (its one thread answers every connection past the caps): long enough for a request already
  // sent to arrive and for a client that read the reply to close.
  ::shutdown(sock, SHUT_WR);
  char sink[16384];
  const auto linger = !t_reject         ? std::chrono::milliseconds(1000)
                      : !t_reject_hurry ? std::chrono::milliseconds(250)
                                        : std::chrono::milliseconds(0);
  const auto linger_end = Clock::now() + linger;
  for (size_t drained = 0; drained < (4u << 20) && !closing_;) {
    if (wait_io(sock, POLLIN, linger_end, closing_) <= 0) break;
    const ssize_t k = ::recv(sock, sink, sizeof sink, 0);
    if (k <= 0) break;
    drained += size_t(k);
  }
  ::close(sock);
  return true;
}

// Why `host:port` cannot be bound: the error of a plain bind() of it, as the kernel says it.
std::string bind_error(const std::string& host, int port) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0)
    return ::gai_strerror(rc);
  std::string why = "unknown";
  for (addrinfo* a = res; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    why = ::bind(fd, a->ai_addr, a->ai_addrlen) == 0 ? "the port was taken while binding"
                                                     : std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(res);
  return why;
}

}  // namespace zaya::serve
