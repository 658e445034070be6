#include "infer/generate.h"

#include <chrono>

#include "core/clock.h"
#include "core/error.h"

namespace zaya {

const char* end_of_generation(int32_t token, int drawn, const GenerateOptions& opt,
                              const std::function<bool(int32_t)>& on_token) {
  if (on_token && !on_token(token)) return "stop";
  if (token == opt.eos) return "eos";
  if (drawn >= opt.max_new_tokens) return "length";
  return nullptr;
}

std::span<const float> drawable_logits(std::span<const float> logits, const GenerateOptions& opt) {
  ZAYA_CHECK(opt.drawable >= 0, "drawable ids: ", opt.drawable, " is negative");
  if (opt.drawable == 0 || size_t(opt.drawable) >= logits.size()) return logits;
  return logits.first(size_t(opt.drawable));
}

GenerateResult generate_tokens(Decoder& decoder, std::span<const int32_t> prompt,
                               const GenerateOptions& opt,
                               const std::function<bool(int32_t)>& on_token) {
  ZAYA_CHECK(!prompt.empty(), "generate: the prompt needs at least one token");
  ZAYA_CHECK(opt.max_new_tokens >= 0, "generate: max_new_tokens must be >= 0");
  validate_sampling(opt.sampling);
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  GenerateResult out;
  out.finish_reason = "length";
  std::vector<int32_t> context(prompt.begin(), prompt.end());
  const int64_t cap = decoder.capacity();
  auto window = [&] {
    const size_t n = std::min<size_t>(context.size(), size_t(cap));
    return std::span<const int32_t>(context.data() + context.size() - n, n);
  };
  std::span<const float> logits = decoder.prefill(window());
  for (int n = 0; n < opt.max_new_tokens; ++n) {
    const int32_t next =
        sample_next(drawable_logits(logits, opt), context, opt.sampling, uint64_t(context.size()));
    if (n == 0) out.prefill_seconds = seconds_since(t0);
    context.push_back(next);
    out.tokens.push_back(next);
    if (const char* end = end_of_generation(next, n + 1, opt, on_token)) {
      out.finish_reason = end;
      break;
    }
    logits = decoder.length() < cap ? decoder.step(next) : decoder.prefill(window());
  }
  out.decode_seconds = seconds_since(t0) - out.prefill_seconds;
  return out;
}

}  // namespace zaya
