#include "eval/task_eval.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>

#include "core/error.h"
#include "dist/communicator.h"
#include "eval/context_split.h"
#include "eval/task_prompts.h"
#include "infer/batch_decoder.h"
#include "model/zaya_model.h"

namespace zaya {

PreparedTask prepare_task(const std::string& path, const TaskSettings& s,
                          const Tokenizer& tokenizer, int32_t prefix_token) {
  std::optional<TaskLayout> forced;
  if (!s.format.empty()) forced = parse_layout(s.format);
  PreparedTask p;
  p.task = read_task_file(path, forced, s.max_record_bytes);
  p.items = s.limit > 0 ? std::min(p.task.items.size(), size_t(s.limit)) : p.task.items.size();
  for (size_t i = 0; i < p.items; ++i) {
    const auto prompts = item_prompts(p.task, i, s.shots, s.seed);
    for (size_t c = 0; c < prompts.size(); ++c) {
      try {
        ContextIds ids = split_context_continuation(tokenizer, prompts[c].first, prompts[c].second,
                                                    prefix_token);
        p.requests.push_back({std::move(ids.context), std::move(ids.continuation)});
      } catch (const Error& e) {
        ZAYA_FAIL(path, ":", p.task.items[i].line, ": choice ", c, ": ", e.what());
      }
    }
  }
  return p;
}

namespace {

size_t choices_of(const PreparedTask& p, size_t item) {
  return p.task.items[item].queries.size();
}

std::string gib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GiB", double(bytes) / double(int64_t(1) << 30));
  return text;
}

}  // namespace

void check_task_fits_context(const PreparedTask& p, const ModelConfig& c) {
  for (size_t i = 0, r = 0; i < p.items; r += choices_of(p, i), ++i) {
    for (size_t k = 0; k < choices_of(p, i); ++k) {
      const size_t tokens = p.requests[r + k].continuation.size();
      ZAYA_CHECK(int64_t(tokens) <= c.max_seq_len, p.task.path, ":", p.task.items[i].line,
                 ": choice ", k, " has ", tokens, " tokens, more than the model's context of ",
                 c.max_seq_len,
                 " ('max_seq_len'; a context is cut on the left, a choice cannot "
                 "be); the ",
                 i, " items before it fit ('limit' ", i, " stops short of it)");
    }
  }
}

ScoringMemory scoring_memory(const PreparedTask& p, const ModelConfig& c, int batch) {
  ScoringMemory m;
  m.sequences = int(std::min(size_t(std::max(batch, 1)), std::max<size_t>(p.requests.size(), 1)));
  m.capacity = 1;
  for (const ContinuationRequest& rq : p.requests) {
    const int64_t positions = int64_t(rq.context.size() + rq.continuation.size()) - 1;
    m.capacity = std::max(m.capacity, std::min<int64_t>(positions, c.max_seq_len));
  }
  DecoderLimits limits;
  limits.max_sequences = m.sequences;
  limits.capacity = m.capacity;
  m.bytes = BatchDecoder::least_memory_bytes(c, limits);
  return m;
}

void check_scoring_memory(std::span<const PreparedTask> tasks, const ModelConfig& c, int batch,
                          int64_t memory_bytes, const std::string& batch_field) {
  for (const PreparedTask& p : tasks) {
    const ScoringMemory m = scoring_memory(p, c, batch);
    if (m.bytes <= memory_bytes) continue;
    int fits = 0;  // the largest batch that fits: the memory grows with the sequences
    for (int step = 1 << 30; step > 0; step /= 2)
      if (fits + step <= m.sequences && scoring_memory(p, c, fits + step).bytes <= memory_bytes)
        fits += step;
    ZAYA_FAIL(batch_field, " ", batch, ": scoring ", p.task.path, " holds ", m.sequences,
              " sequences of up to ", m.capacity, " positions at once, at least ", gib(m.bytes),
              " (their caches and logits), more than this machine's ", gib(memory_bytes), "; ",
              fits > 0 ? "a batch of at most " + std::to_string(fits) + " fits"
                       : std::string("not even a batch of 1 fits"));
  }
}

namespace {

// The flat request indices of the items rank `rank` of `world` scores (item i: rank i mod world).
std::vector<size_t> rank_requests(const PreparedTask& p, int rank, int world) {
  std::vector<size_t> out;
  for (size_t i = 0, r = 0; i < p.items; r += choices_of(p, i), ++i)
    if (int(i % size_t(world)) == rank)
      for (size_t c = 0; c < choices_of(p, i); ++c) out.push_back(r + c);
  return out;
}

}  // namespace

std::vector<ChoiceScores> score_task(ZayaModel& model, const PreparedTask& p, int batch,
                                     dist::Communicator* comm) {
  const int world = comm == nullptr ? 1 : comm->world_size();
  const int rank = comm == nullptr ? 0 : comm->rank();
  std::vector<ContinuationScore> flat(p.requests.size());
  if (world == 1) {
    flat = score_continuations(model, p.requests, batch);
  } else {
    // This rank's items, then every rank's scores gathered: (log-likelihood, greedy) per request,
    // in slots of the largest rank's length, doubles moved as pairs of I32 (bytes only).
    std::vector<ContinuationRequest> mine;
    for (const size_t r : rank_requests(p, rank, world)) mine.push_back(p.requests[r]);
    const std::vector<ContinuationScore> own = score_continuations(model, mine, batch);
    size_t slot = 0;
    for (int r = 0; r < world; ++r) slot = std::max(slot, rank_requests(p, r, world).size());
    std::vector<double> send(2 * slot, 0.0), all(2 * slot * size_t(world));
    for (size_t k = 0; k < own.size(); ++k) {
      send[2 * k] = own[k].logprob;
      send[2 * k + 1] = own[k].is_greedy ? 1.0 : 0.0;
    }
    static_assert(sizeof(double) == 2 * sizeof(int32_t));
    comm->all_gather(send.data(), all.data(), 4 * slot, DType::I32);
    for (int r = 0; r < world; ++r) {
      const std::vector<size_t> theirs = rank_requests(p, r, world);
      for (size_t k = 0; k < theirs.size(); ++k) {
        flat[theirs[k]].logprob = all[2 * (size_t(r) * slot + k)];
        flat[theirs[k]].is_greedy = all[2 * (size_t(r) * slot + k) + 1] != 0.0;
      }
    }
  }
  std::vector<ChoiceScores> out(p.items);
  for (size_t i = 0, r = 0; i < p.items; ++i)
    for (size_t c = 0; c < choices_of(p, i); ++c, ++r) {
      out[i].loglikelihoods.push_back(flat[r].logprob);
      out[i].is_greedy.push_back(flat[r].is_greedy);
    }
  return out;
}

}  // namespace zaya
