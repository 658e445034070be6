#include "serve/connection_reader.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "core/error.h"
#include "serve/completion_request.h"
#include "serve/http_framing.h"

namespace zaya::serve {

namespace {

using std::chrono::milliseconds;

// Lingering closes: after a reply, long enough for a request already sent to arrive and for a
// client that read the reply to close (closing with unread bytes resets the connection, and the
// reset can destroy the reply before the client reads it); shorter after a 503 at the cap.
constexpr milliseconds kLinger{1000}, kRejectLinger{250};
constexpr size_t kMaxDrained = 4u << 20;

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

// Where a request head ends in `buf` (after its blank line), or npos.
size_t head_end(const std::string& buf) {
  const size_t crlf = buf.find("\r\n\r\n"), lf = buf.find("\n\n");
  if (crlf == std::string::npos && lf == std::string::npos) return std::string::npos;
  if (lf == std::string::npos || (crlf != std::string::npos && crlf < lf)) return crlf + 4;
  return lf + 2;
}

// Sends what the socket takes now; a reply this small fits the send buffer of any connection
// that is not itself flooding us with pipelined requests.
void send_now(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t k =
        ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      sent += size_t(k);
    } else if (k < 0 && errno == EINTR) {
      continue;
    } else {
      return;
    }
  }
}

}  // namespace

ConnectionReader::ConnectionReader(const HttpLimits& limits, Dispatch dispatch,
                                   const std::atomic<bool>& closing)
    : limits_(limits), dispatch_(std::move(dispatch)), closing_(closing) {
  ZAYA_CHECK(::pipe2(wake_, O_NONBLOCK | O_CLOEXEC) == 0,
             "zaya serve: cannot make the reader's wake-up pipe");
  thread_ = std::thread([this] { loop(); });
}

ConnectionReader::~ConnectionReader() {
  stop();
  ::close(wake_[0]);
  ::close(wake_[1]);
}

void ConnectionReader::post(Handoff h) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!stopped_) {
      handoffs_.push_back(std::move(h));
      const char byte = 0;
      (void)!::write(wake_[1], &byte, 1);  // a full pipe already wakes the reader
      return;
    }
  }
  if (h.kind != Handoff::Kind::kReject) --open_;  // stopped: closed here, unread
  ::close(h.fd);
}

void ConnectionReader::add(int fd) {
  // Counted here, on the accept loop's thread, in the order connections arrive: the cap is exact
  // however a burst meets the reader's wake-ups.
  if (open_ >= limits_.max_connections) {
    post({Handoff::Kind::kReject, fd, {}, 0});
    return;
  }
  ++open_;
  post({Handoff::Kind::kAdd, fd, {}, 0});
}

void ConnectionReader::resume(int fd, std::string rest, int served) {
  post({Handoff::Kind::kResume, fd, std::move(rest), served});
}

void ConnectionReader::finish(int fd) {
  post({Handoff::Kind::kFinish, fd, {}, 0});
}

void ConnectionReader::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_) return;
    stopped_ = true;
    const char byte = 0;
    (void)!::write(wake_[1], &byte, 1);
  }
  if (thread_.joinable()) thread_.join();
}

void ConnectionReader::take_handoffs() {
  std::vector<Handoff> taken;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    taken.swap(handoffs_);
  }
  char sink[256];
  while (::read(wake_[0], sink, sizeof sink) > 0) {
  }
  const auto now = Clock::now();
  for (Handoff& h : taken) {
    Conn& c = conns_[h.fd];
    c = Conn{};
    switch (h.kind) {
      case Handoff::Kind::kAdd:  // the first request: its head within the head deadline
        c.deadline = now + std::chrono::seconds(limits_.head_deadline_s);
        break;
      case Handoff::Kind::kReject:
        c.counted = false;
        answer_error(h.fd, 503,
                     "the server has " + std::to_string(limits_.max_connections) +
                         " connections open; retry later");
        linger(h.fd, c, kRejectLinger);
        break;
      case Handoff::Kind::kResume:
        c.buf = std::move(h.rest);
        c.served = h.served;
        c.deadline = now + std::chrono::seconds(limits_.keep_alive_s);
        advance(h.fd, c);  // a pipelined request may be complete already
        break;
      case Handoff::Kind::kFinish:
        linger(h.fd, c, kLinger);
        break;
    }
  }
}

void ConnectionReader::loop() {
  std::vector<pollfd> polled;
  std::vector<int> expired;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopped_) break;
    }
    take_handoffs();
    if (closing_) {  // a stopping server waits for no client
      while (!conns_.empty()) close_conn(conns_.begin()->first);
    }
    polled.assign(1, pollfd{wake_[0], POLLIN, 0});
    auto next = Clock::now() + milliseconds(200);
    for (const auto& [fd, c] : conns_) {
      polled.push_back(pollfd{fd, POLLIN, 0});
      next = std::min(next, c.deadline);
    }
    const auto wait = std::chrono::duration_cast<milliseconds>(next - Clock::now()).count();
    const int ready =
        ::poll(polled.data(), polled.size(), int(std::clamp<long long>(wait, 0, 200)));
    if (ready < 0 && errno != EINTR) {
      std::fprintf(stderr, "zaya serve: the connection reader's poll failed: errno %d\n", errno);
      break;
    }
    for (size_t i = 1; ready > 0 && i < polled.size(); ++i) {
      if (polled[i].revents == 0) continue;
      const auto it = conns_.find(polled[i].fd);
      if (it != conns_.end()) on_readable(it->first, it->second);
    }
    const auto now = Clock::now();
    expired.clear();
    for (const auto& [fd, c] : conns_)
      if (c.deadline <= now) expired.push_back(fd);
    for (const int fd : expired) {
      const auto it = conns_.find(fd);
      if (it != conns_.end()) on_deadline(fd, it->second);
    }
  }
  while (!conns_.empty()) close_conn(conns_.begin()->first);
}

void ConnectionReader::on_readable(int fd, Conn& c) {
  // Read no more than the phase may hold: a head's limit (one byte past it shows it is over), a
  // body's declared end (bytes past it wait in the kernel for the next request).
  char chunk[16384];
  size_t want = sizeof chunk;
  if (c.phase == Phase::kBody) want = std::min(want, c.total - c.buf.size());
  if (c.phase != Phase::kBody && c.phase != Phase::kLinger)
    want =
        std::min(want, limits_.max_head_bytes + 1 - std::min(c.buf.size(), limits_.max_head_bytes));
  const ssize_t k = ::recv(fd, chunk, want, MSG_DONTWAIT);
  if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return;
  if (k <= 0) {  // the client closed, or the connection failed: nothing to answer
    close_conn(fd);
    return;
  }
  if (c.phase == Phase::kLinger) {
    c.drained += size_t(k);
    if (c.drained >= kMaxDrained) close_conn(fd);
    return;
  }
  c.buf.append(chunk, size_t(k));
  advance(fd, c);
}

void ConnectionReader::advance(int fd, Conn& c) {
  if (c.phase == Phase::kIdle && !c.buf.empty()) {
    c.phase = Phase::kHead;
    c.deadline = Clock::now() + std::chrono::seconds(limits_.head_deadline_s);
  }
  if (c.phase == Phase::kHead) {
    const size_t head = head_end(c.buf);
    if (head == std::string::npos || head > limits_.max_head_bytes) {
      if (c.buf.size() > limits_.max_head_bytes || head != std::string::npos) {
        answer_error(
            fd, 431,
            "the request head is over " + std::to_string(limits_.max_head_bytes) + " bytes");
        linger(fd, c, kLinger);
      }
      return;
    }
    const Framing f =
        check_framing(std::string_view(c.buf).substr(0, head), limits_.max_body_bytes);
    if (f.status != 0) {
      answer_error(fd, f.status, f.message);
      linger(fd, c, kLinger);
      return;
    }
    c.total = head + f.body_bytes;
    if (c.buf.size() < c.total) {
      if (budget_used_ + f.body_bytes > limits_.body_budget_bytes) {
        answer_error(fd, 503, "the server is reading too many request bodies; retry later");
        linger(fd, c, kLinger);
        return;
      }
      c.reserved = f.body_bytes;
      budget_used_ += c.reserved;
      if (f.expect_continue) {
        send_now(fd, "HTTP/1.1 100 Continue\r\n\r\n");
        c.continue_sent = true;
      }
      c.phase = Phase::kBody;
      c.deadline = Clock::now() + std::chrono::seconds(limits_.body_deadline_s);
      return;
    }
    c.phase = Phase::kBody;
  }
  if (c.phase == Phase::kBody && c.buf.size() >= c.total) {
    budget_used_ -= c.reserved;
    ReadRequest rq{fd, c.buf.substr(0, c.total), c.buf.substr(c.total), c.served, c.continue_sent};
    conns_.erase(fd);  // the connection is the answering thread's until it comes back
    dispatch_(std::move(rq));
  }
}

void ConnectionReader::on_deadline(int fd, Conn& c) {
  switch (c.phase) {
    case Phase::kIdle:  // nothing sent (or nothing more after a reply): close quietly
      linger(fd, c, kLinger);
      break;
    case Phase::kHead:
    case Phase::kBody: {
      const bool head = c.phase == Phase::kHead;
      answer_error(
          fd, 408,
          std::string("the request ") + (head ? "head" : "body") + " did not arrive within " +
              std::to_string(head ? limits_.head_deadline_s : limits_.body_deadline_s) + " s");
      linger(fd, c, kLinger);
      break;
    }
    case Phase::kLinger:
      close_conn(fd);
      break;
  }
}

// An error answered before any handler sees the request; the connection closes after it.
void ConnectionReader::answer_error(int fd, int status, const std::string& message) {
  const std::string body =
      ApiError(status, message, {}, status >= 500 ? "server_error" : "invalid_request_error")
          .body()
          .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  send_now(fd, "HTTP/1.1 " + std::to_string(status) + " " + reason(status) +
                   "\r\nContent-Type: application/json\r\nContent-Length: " +
                   std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
  std::fprintf(stderr, "zaya serve: %d before routing: %s\n", status, message.c_str());
}

void ConnectionReader::linger(int fd, Conn& c, milliseconds how_long) {
  budget_used_ -= c.reserved;
  c.reserved = 0;
  c.phase = Phase::kLinger;
  c.buf.clear();
  c.buf.shrink_to_fit();
  c.deadline = Clock::now() + how_long;
  ::shutdown(fd, SHUT_WR);
}

void ConnectionReader::close_conn(int fd) {
  const auto it = conns_.find(fd);
  if (it != conns_.end()) {
    budget_used_ -= it->second.reserved;
    if (it->second.counted) --open_;
    conns_.erase(it);
  }
  ::close(fd);
}

}  // namespace zaya::serve
