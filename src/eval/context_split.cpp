#include "eval/context_split.h"

#include <algorithm>

#include "core/error.h"

namespace zaya {

size_t rstripped_length(std::string_view text) {
  // Multi-byte UTF-8 whitespace of Python's str.isspace that real task files contain.
  static constexpr std::string_view kWide[] = {"\xc2\x85", "\xc2\xa0", "\xe3\x80\x80"};
  size_t n = text.size();
  for (;;) {
    if (n > 0) {
      const unsigned char c = static_cast<unsigned char>(text[n - 1]);
      if (c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f)) {
        --n;
        continue;
      }
    }
    const auto wide = std::find_if(std::begin(kWide), std::end(kWide), [&](std::string_view w) {
      return text.substr(0, n).ends_with(w);
    });
    if (wide == std::end(kWide)) return n;
    n -= wide->size();
  }
}

int32_t loglikelihood_prefix_token(const Tokenizer& tokenizer) {
  if (const auto bos = tokenizer.bos_id()) return *bos;
  const auto eot = tokenizer.end_of_text_id();
  ZAYA_CHECK(eot.has_value(), "the tokenizer has neither a BOS nor an end-of-text token: an empty ",
             "context has nothing to condition on");
  return *eot;
}

ContextIds split_context_continuation(const Tokenizer& tokenizer, std::string_view context,
                                      std::string_view continuation, int32_t prefix_token) {
  ContextIds ids;
  const size_t kept = rstripped_length(context);
  std::string whole(context);
  whole += continuation;
  if (!context.empty()) ids.context = tokenizer.encode(context.substr(0, kept));
  const std::vector<int32_t> all = tokenizer.encode(whole);
  if (all.size() > ids.context.size())
    ids.continuation.assign(all.begin() + ptrdiff_t(ids.context.size()), all.end());
  // Nothing to condition on (an empty context, or one of whitespace only): the prefix token, unless
  // the text starts with it already.
  if (ids.context.empty()) {
    ids.context.push_back(prefix_token);
    if (!ids.continuation.empty() && ids.continuation.front() == prefix_token)
      ids.continuation.erase(ids.continuation.begin());
  }
  ZAYA_CHECK(!ids.continuation.empty(), "the continuation '", continuation,
             "' adds no token of its own after the context");
  return ids;
}

}  // namespace zaya
