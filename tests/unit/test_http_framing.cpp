// The framing check zaya serve makes on every request head before reading a body
// (serve/http_framing.h): malformed lengths are 400, lengths over the limit 413, chunked bodies
// 411, and a well-formed head passes with its length.
#include <gtest/gtest.h>

#include <string>

#include "serve/http_framing.h"

namespace zaya::serve {
namespace {

Framing framing(const std::string& headers) {
  return check_framing("POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + headers + "\r\n", 1000);
}

TEST(HttpFraming, WellFormedHeadsPass) {
  Framing f = framing("Content-Length: 12\r\nExpect: 100-continue\r\n");
  EXPECT_EQ(f.status, 0);
  EXPECT_EQ(f.body_bytes, 12u);
  EXPECT_TRUE(f.expect_continue);
  f = framing("content-length:   7  \r\nContent-Length: 7\r\n");  // repeated, same value
  EXPECT_EQ(f.status, 0);
  EXPECT_EQ(f.body_bytes, 7u);
  EXPECT_EQ(framing("").status, 0);  // no body
  EXPECT_EQ(framing("").body_bytes, 0u);
}

TEST(HttpFraming, BadFramingIsRefusedAtOnce) {
  for (const char* length :
       {"-5", "+5", "abc", "5, 6", "", "1e3", "0x10", "99999999999999999999999"}) {
    const Framing f = framing(std::string("Content-Length: ") + length + "\r\n");
    EXPECT_EQ(f.status, 400) << length;
    EXPECT_NE(f.message.find("Content-Length"), std::string::npos) << f.message;
  }
  EXPECT_EQ(framing("Content-Length: 5\r\nContent-Length: 6\r\n").status, 400);
  EXPECT_EQ(framing("Content-Length: 1001\r\n").status, 413);
  EXPECT_EQ(framing("Content-Length: 1000\r\n").status, 0);
  EXPECT_EQ(framing("Transfer-Encoding: chunked\r\n").status, 411);
  EXPECT_EQ(framing("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n").status, 400);
  EXPECT_EQ(framing("no colon here\r\n").status, 400);
  EXPECT_EQ(check_framing("\r\n\r\n", 1000).status, 400);  // no request line
}

}  // namespace
}  // namespace zaya::serve
