#include "bench/decode_bench.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "bench/membw_bench.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/rng.h"
#include "infer/batch_decoder.h"
#include "infer/sampling.h"
#include "model/model_info.h"
#include "model/weights_io.h"
#include "model/zaya_model.h"

namespace zaya {

namespace {

using Clock = std::chrono::steady_clock;
int32_t greedy(std::span<const float> logits) {
  return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

}  // namespace

DecodeBenchResult run_decode_bench(const ModelConfig& c, const DecodeBenchOptions& opt,
                                   std::FILE* out) {
  ZAYA_CHECK(opt.prompt >= 1 && opt.new_tokens >= 2,
             "bench decode: --prompt must be >= 1 and "
             "--new-tokens >= 2");
  ZAYA_CHECK(opt.prompt + opt.new_tokens <= c.max_seq_len, "bench decode: --prompt ", opt.prompt,
             " + --new-tokens ", opt.new_tokens, " exceed the model's max_seq_len ", c.max_seq_len);
  ZayaModel model(c);
  model.params().init(opt.seed);
  if (!opt.save_model_dir.empty()) save_model_dir(opt.save_model_dir, model);
  DecodeBenchResult res;
  res.cache_bytes_per_token = BatchDecoder::cache_bytes_per_token(c);
  res.mha_cache_bytes_per_token = BatchDecoder::mha_cache_bytes_per_token(c);
  res.gqa_cache_bytes_per_token = BatchDecoder::gqa_cache_bytes_per_token(c);

  // The bandwidth a step's reads can have at best: STREAM triad at this thread count, measured
  // again after the decodes (the rows are printed then, against the higher of the two).
  MembwOptions mo;
  mo.threads = {omp_get_max_threads()};
  mo.times = 5;
  res.bandwidth_before_gbs = run_membw_bench(mo, out).front().triad;

  const ModelInfo info = compute_model_info(c, opt.prompt);
  const double expert_bytes = 4.0 * 3 * c.hidden_size * c.expert_hidden;
  const double dense_bytes = 4.0 * double(info.total_params - info.expert_params);
  const Philox rng(opt.seed, hash_name("bench decode prompts"));
  for (const int B : opt.batches) {
    ZAYA_CHECK(B >= 1, "bench decode: batch sizes must be >= 1, got ", B);
    DecoderLimits lim;
    lim.max_sequences = B;
    lim.capacity = opt.prompt + opt.new_tokens;
    BatchDecoder dec(model, lim);
    DecodeBenchRow row;
    row.batch = B;
    std::vector<int> ids;
    std::vector<int32_t> next;
    for (int b = 0; b < B; ++b) {
      std::vector<int32_t> prompt(static_cast<size_t>(opt.prompt));
      for (int t = 0; t < opt.prompt; ++t)
        prompt[size_t(t)] =
            int32_t(rng.words(uint64_t(b) * opt.prompt + uint64_t(t))[0] % uint32_t(c.vocab_size));
      const auto t0 = Clock::now();
      ids.push_back(dec.add(prompt));
      next.push_back(greedy(dec.logits(ids.back())));
      if (b == 0) row.ttft_ms = seconds_since(t0) * 1e3;
    }
    // Every sequence decodes new_tokens - 1 more tokens in batched steps (greedy).
    double bytes = 0, experts = 0, busy = 0;
    const int steps = opt.new_tokens - 1;
    for (int s = 0; s < steps; ++s) {
      const auto t0 = Clock::now();
      dec.step(ids, next);
      for (int b = 0; b < B; ++b) next[size_t(b)] = greedy(dec.logits(ids[size_t(b)]));
      busy += seconds_since(t0);
      double used = 0;
      for (const auto& routes : dec.last_routes()) {
        std::set<int32_t> distinct(routes.begin(), routes.end());
        distinct.erase(int32_t(c.num_experts));  // the skip route reads no weights
        used += double(distinct.size());
      }
      experts += used / double(dec.last_routes().size());
      const double context = double(dec.length(ids[0]));  // every sequence has this length
      bytes += dense_bytes + used * expert_bytes + B * context * double(res.cache_bytes_per_token);
    }
    row.step_ms = busy / steps * 1e3;
    row.tokens_per_s = double(B) * steps / busy;
    row.bytes_per_step = bytes / steps;
    row.experts_per_stage = experts / steps;
    res.rows.push_back(row);
  }
  res.bandwidth_after_gbs = run_membw_bench(mo, nullptr).front().triad;
  res.bandwidth_gbs = std::max(res.bandwidth_before_gbs, res.bandwidth_after_gbs);
  if (out)
    std::fprintf(out,
                 "STREAM triad %.1f GB/s before the decodes, %.1f after: the bound takes %.1f\n",
                 res.bandwidth_before_gbs, res.bandwidth_after_gbs, res.bandwidth_gbs);
  for (DecodeBenchRow& row : res.rows) {
    const int B = row.batch;
    row.bound_tokens_per_s = B / (row.bytes_per_step / (res.bandwidth_gbs * 1e9));
    if (out)
      std::fprintf(out,
                   "batch %3d: %9.1f tokens/s (%.2f ms a step), time to first token %.1f ms; "
                   "a step reads %.1f MB (%.1f experts per MoE stage): bound %.0f tokens/s at "
                   "%.1f GB/s, %.0f%% of it\n",
                   B, row.tokens_per_s, row.step_ms, row.ttft_ms, row.bytes_per_step / 1e6,
                   row.experts_per_stage, row.bound_tokens_per_s, res.bandwidth_gbs,
                   100.0 * row.tokens_per_s / row.bound_tokens_per_s);
  }
  return res;
}

}  // namespace zaya
