// A request as zaya serve's handlers see it, and the response they fill (serve/http_server.h
// parses the one and writes the other with Boost.Beast): plain values, no HTTP library's types.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zaya::serve {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // the target without its query
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // The value of header `name` (case-insensitive), or "" when absent.
  std::string header(std::string_view name) const;
};

// Where a streamed response writes (server-sent events): each write goes out as one chunk.
class EventSink {
 public:
  virtual ~EventSink() = default;
  // False when the client went away (or the write timed out): the stream should end.
  virtual bool write(std::string_view data) = 0;
  // The stream is complete (its last chunk follows).
  virtual void done() = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // besides Content-Type and framing
  // A streamed (chunked) response instead of `body`: `stream` is called until it returns false,
  // then `stream_end(complete)` once, complete when the stream called done().
  std::function<bool(EventSink&)> stream;
  std::function<void(bool complete)> stream_end;

  void set_header(std::string name, std::string value) {
    headers.emplace_back(std::move(name), std::move(value));
  }
  void set_content(std::string content, std::string type) {
    body = std::move(content);
    content_type = std::move(type);
  }
};

using HttpHandler = std::function<void(const HttpRequest&, HttpResponse&)>;

}  // namespace zaya::serve
