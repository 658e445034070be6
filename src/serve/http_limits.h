// The limits zaya serve's HTTP front keeps (http_server.h, connection_reader.h): deadlines for a
// request's head and body, keep-alive, the sizes it buffers, the connections it holds open and the
// threads that answer complete requests.
#pragma once

#include <cstddef>

namespace zaya::serve {

struct HttpLimits {
  int head_deadline_s = 10;  // from a request's first byte to the end of its head
  int body_deadline_s = 30;  // for the whole body
  int keep_alive_s = 5;      // idle between requests on one connection
  int keep_alive_max = 100;  // requests per connection
  int write_timeout_s = 10;  // without progress while writing a response
  size_t max_head_bytes = 16 << 10;
  size_t max_body_bytes = 1 << 20;
  // Bodies being read at once, in all: a head whose body would pass it gets 503 at once. With
  // the heads' 16 KiB per connection this bounds what the reader buffers.
  size_t body_budget_bytes = size_t(256) << 20;
  size_t max_connections = 2048;  // open at once (read by one thread); past it 503 at once
  size_t threads = 256;           // answering complete requests, started when first needed
};

}  // namespace zaya::serve
