#include "aegis/http_fetch.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>

#include "core/error.h"

namespace zaya::aegis {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

HttpUrl parse_http_url(const std::string& url, const std::string& what) {
  const std::string scheme = "http://";
  ZAYA_CHECK(url.compare(0, scheme.size(), scheme) == 0, what, " '", url,
             "': expected http://HOST[:PORT][/PATH] (plain http)");
  const std::string rest = url.substr(scheme.size());
  const size_t slash = rest.find('/');
  const std::string authority = rest.substr(0, slash);
  HttpUrl u;
  u.target = slash == std::string::npos ? "/" : rest.substr(slash);
  const size_t colon = authority.rfind(':');
  u.host = authority.substr(0, colon);
  u.port = colon == std::string::npos ? "80" : authority.substr(colon + 1);
  ZAYA_CHECK(!u.host.empty(), what, " '", url, "': no host");
  ZAYA_CHECK(!u.port.empty() && u.port.find_first_not_of("0123456789") == std::string::npos &&
                 u.port.size() <= 5 && std::stoi(u.port) <= 65535,
             what, " '", url, "': the port '", u.port, "' is not a number in [0, 65535]");
  return u;
}

std::string http_get(const std::string& url, double timeout_s, size_t max_body_bytes) {
  const HttpUrl u = parse_http_url(url, "URL");
  boost::asio::io_context io;
  beast::tcp_stream stream(io);
  const auto deadline = std::chrono::milliseconds(int64_t(timeout_s * 1000));
  beast::error_code ec;
  tcp::resolver resolver(io);
  const auto endpoints = resolver.resolve(u.host, u.port, ec);
  ZAYA_CHECK(!ec, url, ": cannot resolve '", u.host, "': ", ec.message());
  // The deadline covers each operation of the exchange; the async calls honour it.
  http::response_parser<http::string_body> parser;
  parser.body_limit(max_body_bytes);
  beast::flat_buffer buffer;
  http::request<http::empty_body> req{http::verb::get, u.target, 11};
  req.set(http::field::host, u.host);
  req.set(http::field::user_agent, "zaya-aegis");
  stream.expires_after(deadline);
  stream.async_connect(endpoints, [&](beast::error_code e, const tcp::endpoint&) {
    if (e) {
      ec = e;
      return;
    }
    stream.expires_after(deadline);
    http::async_write(stream, req, [&](beast::error_code e2, size_t) {
      if (e2) {
        ec = e2;
        return;
      }
      stream.expires_after(deadline);
      http::async_read(stream, buffer, parser, [&](beast::error_code e3, size_t) { ec = e3; });
    });
  });
  io.run();
  ZAYA_CHECK(ec != http::error::body_limit, url, ": the response is larger than ", max_body_bytes,
             " bytes");
  ZAYA_CHECK(!ec, url, ": ", ec == beast::error::timeout ? "no answer within the deadline" : "",
             ec.message());
  const auto& res = parser.get();
  ZAYA_CHECK(res.result() == http::status::ok, url, ": HTTP status ", res.result_int(),
             " (expected 200)");
  return res.body();
}

}  // namespace zaya::aegis
