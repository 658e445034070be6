// The body of a POST /v1/completions request (serve/completion_request.h): bytes from any client
// on the network. serve::ApiError is the parser's answer to bad input; anything else is a finding.
#include <string_view>

#include "fuzz_util.h"
#include "serve/completion_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  try {
    const zaya::serve::CompletionRequest r =
        zaya::serve::parse_completion_request(body, "zaya", 256, 512);
    // What a parsed request promises the server.
    if (r.max_tokens < 1 || r.max_tokens > 256 || r.stop.size() > 4 || r.model != "zaya") abort();
    zaya::validate_sampling(r.sampling);
  } catch (const zaya::serve::ApiError& e) {
    if (e.status < 400 || e.status > 499) abort();
    (void)e.body().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return 0;
}
