#include "serve/http_server.h"

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

#include <boost/beast/core/error.hpp>
#include <boost/beast/http.hpp>

#include "core/error.h"

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

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;

template <class Buffers>
bool send_buffers(int fd, const Buffers& buffers, int timeout_s, const std::atomic<bool>& closing) {
  for (auto it = net::buffer_sequence_begin(buffers); it != net::buffer_sequence_end(buffers);
       ++it) {
    const net::const_buffer b(*it);
    if (!send_all(fd, static_cast<const char*>(b.data()), b.size(), timeout_s, closing))
      return false;
  }
  return true;
}

// Writes what a Beast serializer produces (its header alone, or the whole message).
template <class Serializer>
bool write_serialized(int fd, Serializer& sr, bool header_only, int timeout_s,
                      const std::atomic<bool>& closing) {
  beast::error_code ec;
  bool ok = true;
  while (ok && !(header_only ? sr.is_header_done() : sr.is_done())) {
    sr.next(ec, [&](beast::error_code&, const auto& buffers) {
      ok = send_buffers(fd, buffers, timeout_s, closing);
      sr.consume(net::buffer_size(buffers));
    });
    if (ec) return false;
  }
  return ok;
}

// The request read in full (connection_reader.h), parsed; false with `why` when it is not HTTP.
bool parse_request(const std::string& bytes, const HttpLimits& limits, HttpRequest& out,
                   bool& keep_alive, std::string& why) {
  http::request_parser<http::string_body> parser;
  parser.eager(true);
  parser.header_limit(std::uint32_t(std::min<size_t>(limits.max_head_bytes + 4, UINT32_MAX)));
  parser.body_limit(limits.max_body_bytes);
  beast::error_code ec;
  size_t used = 0;
  while (!parser.is_done() && used < bytes.size()) {
    used += parser.put(net::buffer(bytes.data() + used, bytes.size() - used), ec);
    if (ec && ec != http::error::need_more) {
      why = ec.message();
      return false;
    }
  }
  if (!parser.is_done()) {
    why = "the request ends early";
    return false;
  }
  http::request<http::string_body>& req = parser.get();
  out.method = std::string(req.method_string());
  const std::string target(req.target());
  out.path = target.substr(0, target.find('?'));
  for (const auto& field : req)
    out.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  out.body = std::move(req.body());
  keep_alive = req.keep_alive();
  return true;
}

bool asks_to_close(const HttpResponse& r) {
  for (const auto& [name, value] : r.headers)
    if (beast::iequals(name, "connection") && beast::iequals(value, "close")) return true;
  return false;
}

// A streamed response's chunks, straight to the socket.
class ChunkSink final : public EventSink {
 public:
  ChunkSink(int fd, int timeout_s, const std::atomic<bool>& closing)
      : fd_(fd), timeout_s_(timeout_s), closing_(closing) {}
  bool write(std::string_view data) override {
    if (data.empty()) return ok_;  // an empty chunk would end the stream
    ok_ = ok_ && send_buffers(fd_, http::make_chunk(net::const_buffer(data.data(), data.size())),
                              timeout_s_, closing_);
    return ok_;
  }
  void done() override { done_ = true; }
  bool ok() const { return ok_; }
  bool finished() const { return done_; }

 private:
  int fd_, timeout_s_;
  const std::atomic<bool>& closing_;
  bool ok_ = true, done_ = false;
};

template <class Message>
void set_headers(Message& m, const HttpResponse& r, bool keep_alive) {
  if (!r.content_type.empty()) m.set(http::field::content_type, r.content_type);
  for (const auto& [name, value] : r.headers)
    if (!beast::iequals(name, "connection")) m.set(name, value);
  m.keep_alive(keep_alive);
}

// Writes `r` (whole, or its stream) to fd; false when the client is gone.
bool write_response(int fd, HttpResponse& r, bool keep_alive, const HttpLimits& limits,
                    const std::atomic<bool>& closing) {
  const int timeout_s = limits.write_timeout_s;
  if (!r.stream) {
    http::response<http::string_body> m{http::status::ok, 11};
    m.result(unsigned(r.status));
    set_headers(m, r, keep_alive);
    m.body() = std::move(r.body);
    m.prepare_payload();
    http::response_serializer<http::string_body> sr{m};
    return write_serialized(fd, sr, /*header_only=*/false, timeout_s, closing);
  }
  http::response<http::empty_body> m{http::status::ok, 11};
  m.result(unsigned(r.status));
  set_headers(m, r, keep_alive);
  m.chunked(true);
  http::response_serializer<http::empty_body> sr{m};
  ChunkSink sink(fd, timeout_s, closing);
  bool ok = write_serialized(fd, sr, /*header_only=*/true, timeout_s, closing);
  while (ok && !sink.finished() && r.stream(sink)) ok = sink.ok();
  ok = ok && sink.ok() && sink.finished() &&
       send_buffers(fd, http::make_chunk_last(), timeout_s, closing);
  if (r.stream_end) r.stream_end(ok);
  return ok;
}

}  // namespace

std::string HttpRequest::header(std::string_view name) const {
  for (const auto& [key, value] : headers)
    if (beast::iequals(key, beast::string_view(name.data(), name.size()))) return value;
  return "";
}

HttpServer::HttpServer(const HttpLimits& limits) : limits_(limits) {}

HttpServer::~HttpServer() {
  stop_threads();
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

void HttpServer::route(const std::string& method, const std::string& path, HttpHandler handler) {
  routes_[{method, path}] = std::move(handler);
}

int HttpServer::bind(const std::string& host, int port) {
  const std::string where = port == 0 ? host + " (any port)" : host + ":" + std::to_string(port);
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0)
    ZAYA_FAIL("zaya serve: cannot listen on ", where, ": ", ::gai_strerror(rc));
  std::string why = "no address";
  for (addrinfo* a = res; a && listen_fd_ < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    // The port is this server's alone: SO_REUSEADDR (a restart need not wait out TIME_WAIT),
    // not SO_REUSEPORT (under which a second server would share it).
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    // The kernel's largest backlog: a burst of connections waits in its queue while the accept
    // loop is busy, rather than having its handshakes dropped and retried a second later.
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      listen_fd_ = fd;
    } else {
      why = std::strerror(errno);
      ::close(fd);
    }
  }
  ::freeaddrinfo(res);
  if (listen_fd_ < 0)
    ZAYA_FAIL("zaya serve: cannot listen on ", where, ": ", why,
              port ? " (is another server on port " + service + "? choose another with --port)"
                   : std::string());
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  return a.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&a)->sin6_port)
                                 : ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
}

void HttpServer::run(const std::function<void()>& on_listening) {
  ZAYA_CHECK(listen_fd_ >= 0, "HttpServer::run: bind() first");
  pool_ = std::make_unique<AnswerPool>(limits_.threads, 4);
  reader_ = std::make_unique<ConnectionReader>(
      limits_,
      [this](ReadRequest rq) {
        auto shared = std::make_shared<ReadRequest>(std::move(rq));
        pool_->enqueue([this, shared] { answer(std::move(*shared)); });
      },
      closing_);
  if (on_listening) on_listening();
  accept_loop();
  ::close(listen_fd_);
  listen_fd_ = -1;
  stop_threads();
}

void HttpServer::accept_loop() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    const int r = ::poll(&p, 1, 200);
    if (r <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      reader_->add(fd);  // the reader closes it in the end
    } else if (errno == EMFILE || errno == ENFILE) {
      // Out of descriptors: the reader's cap keeps below the limit, so this is a burst beyond
      // it; wait for connections to close rather than spin.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

void HttpServer::stop_threads() {
  // The reader first: it closes the connections still being read, and those the answering
  // threads hand back from now on.
  if (reader_) reader_->stop();
  if (pool_) pool_->shutdown();
}

void HttpServer::handle(const HttpRequest& request, HttpResponse& response) const {
  const auto it = routes_.find({request.method, request.path});
  if (it == routes_.end()) {
    response.status = 404;
    response.set_content(error_body_(404, "no route " + request.method + " " + request.path),
                         "application/json");
    return;
  }
  try {
    it->second(request, response);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zaya serve: %s\n", e.what());
    response = HttpResponse{};
    response.status = 500;
    response.set_content(error_body_(500, e.what()), "application/json");
  }
}

bool HttpServer::respond(int fd, const std::string& bytes) {
  HttpRequest request;
  HttpResponse response;
  bool keep_alive = false;
  std::string why;
  if (!parse_request(bytes, limits_, request, keep_alive, why)) {
    response.status = 400;
    response.set_content(error_body_(400, "the request is not HTTP/1.1: " + why),
                         "application/json");
    write_response(fd, response, false, limits_, closing_);
    return false;
  }
  handle(request, response);
  if (response_observer_) response_observer_(response.status);
  keep_alive = keep_alive && !closing_ && !asks_to_close(response);
  return write_response(fd, response, keep_alive, limits_, closing_) && keep_alive;
}

void HttpServer::answer(ReadRequest rq) {
  const int fd = rq.fd;
  const bool last = rq.served + 1 >= limits_.keep_alive_max || closing_;
  bool open = false;
  try {
    open = respond(fd, rq.request) && !last && !closing_;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zaya serve: connection dropped: %s\n", e.what());
  }
  if (open)
    reader_->resume(fd, std::move(rq.rest), rq.served + 1);
  else
    reader_->finish(fd);
}

}  // namespace zaya::serve
