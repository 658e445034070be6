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
  // A thread more when none is idle for this job, up to the cap; else the job waits. (A failed
  // start leaves it to the running threads.)
  if (idle_ <= jobs_.size() && threads_.size() < max_threads_) spawn();
  jobs_.push_back(std::move(fn));
  cv_.notify_one();
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
    }
    fn();
  }
}

void ConnectionPool::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

// httplib's accept loop hands each new connection here: it goes to the reader at once, on the
// accept loop's own thread (no thread waits on a connection that has sent nothing).
class GuardedServer::AcceptQueue : public httplib::TaskQueue {
 public:
  explicit AcceptQueue(GuardedServer& server) : server_(server) {}
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override { server_.stop_threads(); }

 private:
  GuardedServer& server_;
};

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

GuardedServer::~GuardedServer() {
  stop_threads();
}

httplib::TaskQueue* GuardedServer::start_connections() {
  pool_ = std::make_unique<ConnectionPool>(limits_.threads, 4);
  reader_ = std::make_unique<ConnectionReader>(
      limits_,
      [this](ReadRequest rq) {
        auto shared = std::make_shared<ReadRequest>(std::move(rq));
        pool_->enqueue([this, shared] { answer(std::move(*shared)); });
      },
      closing_);
  return new AcceptQueue(*this);
}

void GuardedServer::stop_threads() {
  // The reader first: it closes the connections still being read, and those the answering
  // threads hand back from now on.
  if (reader_) reader_->stop();
  if (pool_) pool_->shutdown();
}

void GuardedServer::widen_backlog() {
  // listen() again on a listening socket changes only its backlog.
  if (::listen(svr_sock_, SOMAXCONN) != 0)
    std::fprintf(stderr, "zaya serve: cannot widen the listen backlog: %s\n", std::strerror(errno));
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
  reader_->add(sock);  // the reader closes it in the end
  return true;
}

void GuardedServer::answer(ReadRequest rq) {
  const int fd = rq.fd;
  const bool last = rq.served + 1 >= limits_.keep_alive_max || closing_;
  bool connection_closed = false;
  try {
    RequestStream strm(fd, std::move(rq.request), limits_, closing_, rq.continue_sent);
    process_request(strm, last, connection_closed, {});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zaya serve: connection dropped: %s\n", e.what());
    connection_closed = true;
  }
  if (connection_closed || last || closing_) {
    reader_->finish(fd);
  } else {
    reader_->resume(fd, std::move(rq.rest), rq.served + 1);
  }
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
