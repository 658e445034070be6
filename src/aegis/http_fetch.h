// One HTTP GET of a plain-http URL (a node exporter's /metrics), with a deadline and a bound on
// the body: Boost.Beast's client over one connection per call. Errors (a malformed URL, a refused
// connection, the deadline, a status other than 200, a body over the bound) are zaya::Error
// naming the URL and the cause.
#pragma once

#include <cstddef>
#include <string>

namespace zaya::aegis {

struct HttpUrl {
  std::string host, port, target;  // "h", "9100", "/metrics"
};
// "http://HOST[:PORT][/PATH]" (port 80 and path "/" by default); an error names `what`.
HttpUrl parse_http_url(const std::string& url, const std::string& what);

std::string http_get(const std::string& url, double timeout_s, size_t max_body_bytes);

}  // namespace zaya::aegis
