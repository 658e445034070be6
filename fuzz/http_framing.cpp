// A request head as zaya serve reads it before any body (serve/http_framing.h): bytes from any
// client on the network. Every head gets an answer: fine with a length within the limit, or a
// 4xx status with a message; a crash or any other answer is a finding.
#include <string_view>

#include "fuzz_util.h"
#include "serve/http_framing.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view head(reinterpret_cast<const char*>(data), size);
  const zaya::serve::Framing f = zaya::serve::check_framing(head, 1 << 20);
  if (f.status == 0 && f.body_bytes > (1u << 20)) abort();
  if (f.status != 0 && (f.status < 400 || f.status > 499 || f.message.empty())) abort();
  return 0;
}
