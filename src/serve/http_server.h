// zaya serve's HTTP/1.1 server: zaya's own reading and framing (connection_reader.h: one thread
// reads every connection under whole-head and whole-body deadlines, so no client can hold a
// thread by trickling), Boost.Beast's public parser and serializer for the messages, and a small
// table of routes. No HTTP library's internals are touched.
//
//   - every request's head and body are read by one thread for all connections (poll), under
//     deadlines for the whole head and the whole body, then parsed and answered on a thread of
//     a pool (answer_pool.h); a slow client holds no thread, and 1,000 of them leave /health
//     and completions answered;
//   - framing is checked before anything else (http_framing.h): a Content-Length that is not one
//     plain decimal number gets 400 at once, one over the body limit 413 at once, a chunked
//     request body 411;
//   - at most `max_connections` connections are open at once, and beyond that a connection is
//     answered 503 at once; the listen backlog is the kernel's largest (SOMAXCONN), so a burst is
//     queued rather than having its handshakes dropped;
//   - keep-alive: at most `keep_alive_max` requests per connection, `keep_alive_s` idle between;
//     a request that asks to close (or HTTP/1.0 without keep-alive) is answered, then closed;
//   - a client that half-closes its side after its request (shutdown(SHUT_WR)) gets its reply:
//     the request is read in full before it is answered;
//   - stop_connections() ends every wait within a fraction of a second, so a stopping server does
//     not wait out a slow client.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "serve/answer_pool.h"
#include "serve/connection_reader.h"
#include "serve/http_limits.h"
#include "serve/http_message.h"

namespace zaya::serve {

class HttpServer {
 public:
  explicit HttpServer(const HttpLimits& limits);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Requests for `method` `path` (exact; the query is not part of it) go to `handler`. A
  // request with no route gets 404; one the handler throws out of gets 500.
  void route(const std::string& method, const std::string& path, HttpHandler handler);
  // The body (JSON) of an error the server answers itself: 400 (an unparsable request), 404, 500.
  void set_error_body(std::function<std::string(int status, const std::string& message)> body) {
    error_body_ = std::move(body);
  }
  // Told the status of every response the server writes (the server's metrics).
  void set_response_observer(std::function<void(int status)> observer) {
    response_observer_ = std::move(observer);
  }

  // Binds the listening socket, this server's alone (SO_REUSEADDR, not SO_REUSEPORT); returns the
  // port (the chosen one for port 0). Throws naming the address and the kernel's reason.
  int bind(const std::string& host, int port);
  // Starts the reader and the answering threads (throws, saying why, when they cannot start),
  // calls on_listening, and accepts connections until stop(); then closes the listening socket,
  // finishes the requests being answered and returns.
  void run(const std::function<void()>& on_listening);
  // Makes every wait for a client end (within ~0.2 s) and every connection close after its
  // current response.
  void stop_connections() { closing_ = true; }
  // Ends run()'s accept loop.
  void stop() { stopping_ = true; }
  const HttpLimits& limits() const { return limits_; }

 private:
  void answer(ReadRequest rq);  // on an answering thread
  // Parses, routes and writes one response; false when the connection must close after it.
  bool respond(int fd, const std::string& bytes);
  void handle(const HttpRequest& request, HttpResponse& response) const;
  void accept_loop();
  void stop_threads();

  HttpLimits limits_;
  std::map<std::pair<std::string, std::string>, HttpHandler> routes_;
  std::function<std::string(int, const std::string&)> error_body_;
  std::function<void(int)> response_observer_;
  int listen_fd_ = -1;
  std::atomic<bool> closing_{false}, stopping_{false};
  std::unique_ptr<AnswerPool> pool_;
  std::unique_ptr<ConnectionReader> reader_;
};

}  // namespace zaya::serve
