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

// Requests of one prefix, consecutive in the input: prefilled once, forked for the others.
struct Group {
  size_t begin, end;
};

// Runs of one prefix, each cut into groups of at most `max_sequences` requests.
std::vector<Group> groups_of(std::span<const Prepared> prepared, size_t max_sequences) {
  std::vector<Group> groups;
  for (size_t begin = 0; begin < prepared.size();) {
    size_t end = begin + 1;
    while (end < prepared.size() && end - begin < max_sequences &&
           prepared[end].prefix == prepared[begin].prefix)
      ++end;
    groups.push_back({begin, end});
    begin = end;
  }
  return groups;
}

// A request in the decoder: its sequence and the continuation token whose log-probability its
// logits give next.
struct Row {
  size_t request;
  int id;
  size_t k = 0;
};

// Prefills the group's prefix once and forks it for the group's other requests.
void admit(BatchDecoder& decoder, std::span<const Prepared> prepared, Group g,
           std::vector<Row>& rows) {
  int64_t reserve = 0;
  for (size_t i = g.begin; i < g.end; ++i) reserve = std::max(reserve, prepared[i].positions());
  const int first = decoder.add(prepared[g.begin].prefix, std::max<int64_t>(reserve, 1));
  rows.push_back({g.begin, first});
  for (size_t i = g.begin + 1; i < g.end; ++i)
    rows.push_back({i, decoder.fork(first, std::max<int64_t>(prepared[i].positions(), 1))});
}

// Reads each row's next continuation token's log-probability (the rows in parallel: each is
// computed alone, the same whatever else is in the step), then feeds the token to the rows whose
// continuation goes on, in one batched step; finished rows leave the decoder.
void score_and_step(BatchDecoder& decoder, std::span<const Prepared> prepared,
                    std::vector<Row>& rows, std::span<ContinuationScore> out) {
  std::vector<std::span<const float>> logits;
  for (const Row& r : rows) logits.push_back(decoder.logits(r.id));
  std::vector<double> lp(rows.size());
  std::vector<char> greedy(rows.size());
#pragma omp parallel for schedule(dynamic, 4)
  for (size_t i = 0; i < rows.size(); ++i) {
    bool g = false;
    lp[i] = token_logprob(logits[i], (*prepared[rows[i].request].continuation)[rows[i].k], &g);
    greedy[i] = g;
  }
  std::vector<int> step_ids;
  std::vector<int32_t> step_tokens;
  std::vector<Row> going_on;
  for (size_t i = 0; i < rows.size(); ++i) {
    Row r = rows[i];
    const std::vector<int32_t>& cont = *prepared[r.request].continuation;
    ContinuationScore& s = out[r.request];
    s.logprob += lp[i];
    s.is_greedy = s.is_greedy && greedy[i];
    s.token_logprobs.push_back(lp[i]);
    if (++r.k < cont.size()) {
      step_ids.push_back(r.id);
      step_tokens.push_back(cont[r.k - 1]);
      going_on.push_back(r);
    } else {
      decoder.remove(r.id);
    }
  }
  decoder.step(step_ids, step_tokens);
  rows = std::move(going_on);
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
  const std::vector<Group> groups = groups_of(prepared, size_t(max_sequences));
  DecoderLimits limits;
  // No more slots than requests: a batch larger than the work would only hold idle memory (the
  // scores do not depend on the batch).
  limits.max_sequences = int(std::min(size_t(max_sequences), requests.size()));
  limits.capacity = capacity;
  BatchDecoder decoder(model, limits);
  // Continuous batching: whenever a group's requests fit beside the rows still decoding, it joins;
  // every step then advances every row by one continuation token.
  std::vector<Row> rows;
  for (size_t next = 0; next < groups.size() || !rows.empty();) {
    for (; next < groups.size() &&
           rows.size() + (groups[next].end - groups[next].begin) <= size_t(max_sequences);
         ++next)
      admit(decoder, prepared, groups[next], rows);
    score_and_step(decoder, prepared, rows, out);
  }
  return out;
}

}  // namespace zaya
