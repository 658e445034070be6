#include "infer/continuation_scorer.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "infer/batch_decoder.h"

namespace zaya {

double token_logprob(std::span<const float> logits, int32_t token, bool* is_argmax) {
  size_t best = 0;
  for (size_t v = 1; v < logits.size(); ++v)
    if (logits[v] > logits[best]) best = v;
  const double mx = logits[best];
  double sum = 0;
  for (const float x : logits) sum += std::exp(double(x) - mx);
  if (is_argmax) *is_argmax = best == size_t(token);
  return double(logits[size_t(token)]) - mx - std::log(sum);
}

namespace {

// A request as the decoder runs it: the tokens prefilled (the context, cut on the left when the
// whole does not fit) and the continuation, whose last token is scored but never fed.
struct Prepared {
  std::vector<int32_t> prefix;
  const std::vector<int32_t>* continuation = nullptr;
  int64_t positions() const { return int64_t(prefix.size() + continuation->size()) - 1; }
};

Prepared prepare(const ContinuationRequest& rq, int64_t capacity, size_t index) {
  ZAYA_CHECK(!rq.context.empty() && !rq.continuation.empty(), "request ", index,
             ": the context and the continuation need at least one token each");
  ZAYA_CHECK(int64_t(rq.continuation.size()) <= capacity, "request ", index, ": a continuation of ",
             rq.continuation.size(), " tokens does not fit the model's context of ", capacity);
  Prepared p{rq.context, &rq.continuation};
  const int64_t over = p.positions() - capacity;
  if (over > 0) p.prefix.erase(p.prefix.begin(), p.prefix.begin() + over);
  return p;
}

// Prefills every group's shared prefix once and forks it for the group's other requests; returns
// the sequence id of each request of [begin, end). `group_ends` are the ends of the groups.
std::vector<int> start_sequences(BatchDecoder& decoder, std::span<const Prepared> prepared,
                                 size_t begin, std::span<const size_t> group_ends) {
  std::vector<int> ids;
  for (const size_t end : group_ends) {
    int64_t reserve = 0;
    for (size_t i = begin; i < end; ++i) reserve = std::max(reserve, prepared[i].positions());
    const int first = decoder.add(prepared[begin].prefix, std::max<int64_t>(reserve, 1));
    ids.push_back(first);
    for (size_t i = begin + 1; i < end; ++i)
      ids.push_back(decoder.fork(first, std::max<int64_t>(prepared[i].positions(), 1)));
    begin = end;
  }
  return ids;
}

// Scores the requests `rows` (already in the decoder as `ids`): reads each continuation token's
// log-probability, then feeds it, all rows in one batched step per position.
void decode_rows(BatchDecoder& decoder, std::span<const Prepared> rows, std::span<const int> ids,
                 std::span<ContinuationScore> out) {
  size_t longest = 0;
  for (const Prepared& p : rows) longest = std::max(longest, p.continuation->size());
  for (size_t k = 0; k < longest; ++k) {
    std::vector<int> step_ids;
    std::vector<int32_t> step_tokens;
    for (size_t i = 0; i < rows.size(); ++i) {
      const std::vector<int32_t>& cont = *rows[i].continuation;
      if (k >= cont.size()) continue;
      bool greedy = false;
      const double lp = token_logprob(decoder.logits(ids[i]), cont[k], &greedy);
      out[i].logprob += lp;
      out[i].is_greedy = out[i].is_greedy && greedy;
      out[i].token_logprobs.push_back(lp);
      if (k + 1 < cont.size()) {
        step_ids.push_back(ids[i]);
        step_tokens.push_back(cont[k]);
      }
    }
    decoder.step(step_ids, step_tokens);
  }
  for (const int id : ids) decoder.remove(id);
}

}  // namespace

std::vector<ContinuationScore> score_continuations(ZayaModel& model,
                                                   std::span<const ContinuationRequest> requests,
                                                   int max_sequences) {
  ZAYA_CHECK(max_sequences >= 1, "score: max_sequences must be >= 1, got ", max_sequences);
  const int64_t max_seq = model.config().max_seq_len;
  std::vector<Prepared> prepared;
  int64_t capacity = 1;
  for (size_t i = 0; i < requests.size(); ++i) {
    prepared.push_back(prepare(requests[i], max_seq, i));
    capacity = std::max(capacity, prepared.back().positions());
  }
  std::vector<ContinuationScore> out(requests.size());
  if (requests.empty()) return out;
  DecoderLimits limits;
  limits.max_sequences = max_sequences;
  limits.capacity = capacity;
  BatchDecoder decoder(model, limits);
  // Waves of at most max_sequences requests; within a wave, runs of one prefix share a prefill.
  for (size_t begin = 0; begin < prepared.size();) {
    const size_t wave_end = std::min(prepared.size(), begin + size_t(max_sequences));
    std::vector<size_t> group_ends;
    for (size_t i = begin + 1; i <= wave_end; ++i)
      if (i == wave_end || prepared[i].prefix != prepared[i - 1].prefix) group_ends.push_back(i);
    const std::vector<int> ids = start_sequences(decoder, prepared, begin, group_ends);
    decode_rows(decoder, std::span(prepared).subspan(begin, wave_end - begin), ids,
                std::span(out).subspan(begin, wave_end - begin));
    begin = wave_end;
  }
  return out;
}

}  // namespace zaya
