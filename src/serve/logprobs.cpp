#include "serve/logprobs.h"

#include <algorithm>
#include <numeric>

#include "infer/continuation_scorer.h"

namespace zaya::serve {

using nlohmann::json;

TokenLogprob token_logprob_entry(std::span<const float> logits, int32_t token, int top_n,
                                 size_t listable) {
  TokenLogprob e;
  e.token = token;
  e.logprob = token_logprob(logits, token);
  std::vector<int32_t> ids(std::min(listable, logits.size()));
  std::iota(ids.begin(), ids.end(), 0);
  const size_t n = std::min(size_t(std::max(top_n, 0)), ids.size());
  // The most likely first; equal logits by id, so the answer does not depend on the sort.
  std::partial_sort(ids.begin(), ids.begin() + ptrdiff_t(n), ids.end(), [&](int32_t a, int32_t b) {
    return logits[size_t(a)] > logits[size_t(b)] ||
           (logits[size_t(a)] == logits[size_t(b)] && a < b);
  });
  const double shift = *e.logprob - double(logits[size_t(token)]);  // -(max + log Σ exp)
  bool has_token = false;
  for (size_t i = 0; i < n; ++i) {
    e.top.emplace_back(ids[i], double(logits[size_t(ids[i])]) + shift);
    has_token = has_token || ids[i] == token;
  }
  if (!has_token) e.top.emplace_back(token, *e.logprob);
  return e;
}

json logprobs_json(const Tokenizer& tokenizer, std::span<const TokenLogprob> entries,
                   size_t offset) {
  json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (const TokenLogprob& e : entries) {
    const std::string text = tokenizer.decode(std::span<const int32_t>(&e.token, 1));
    tokens.push_back(text);
    offsets.push_back(offset);
    offset += text.size();
    if (!e.logprob) {
      lps.push_back(nullptr);
      tops.push_back(nullptr);
      continue;
    }
    lps.push_back(*e.logprob);
    json top = json::object();
    for (const auto& [id, lp] : e.top) {
      const std::string t = tokenizer.decode(std::span<const int32_t>(&id, 1));
      if (!top.contains(t)) top[t] = lp;  // two ids with one text: the likelier one
    }
    tops.push_back(top);
  }
  return {{"tokens", tokens},
          {"token_logprobs", lps},
          {"top_logprobs", tops},
          {"text_offset", offsets}};
}

}  // namespace zaya::serve
