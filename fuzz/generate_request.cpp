// One line of a `zaya generate --prompts` file (serve/completion_request.h, the generate door):
// bytes from a user's file. serve::ApiError is the parser's answer to bad input, and a parsed
// request keeps the promises the generate command relies on; anything else is a finding.
#include <string_view>

#include "fuzz_util.h"
#include "io/json_limits.h"
#include "serve/completion_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  if (zaya::json_too_deep(line)) return 0;  // zaya generate refuses it before parsing
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded()) return 0;
  zaya::serve::CompletionRequest base;
  base.max_tokens = 64;
  try {
    const zaya::serve::CompletionRequest r = zaya::serve::parse_request_object(
        j, zaya::serve::RequestLimits{"zaya", 256, 512}, zaya::serve::Door::generate, base);
    if (r.max_tokens < 1 || r.max_tokens > 256 || r.stop.size() > 4 || r.stream || r.echo ||
        r.logprobs || r.prompts.empty())
      abort();
    for (const auto& p : r.prompts)
      for (const int32_t t : p.tokens)
        if (t < 0 || t >= 512) abort();
    zaya::validate_sampling(r.sampling);
  } catch (const zaya::serve::ApiError& e) {
    if (e.status < 400 || e.status > 499) abort();
  }
  return 0;
}
