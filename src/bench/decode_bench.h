// `zaya bench decode`: decoding throughput of a model with the CCA cache, per batch size, against
// the memory-bandwidth bound of this machine measured in the same run: a decode step must read
// every weight it uses (attention, routers, the experts its tokens chose, the LM head) and every
// cached key and value, so bytes per step ÷ measured bandwidth is the fastest a step can be.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "model/config.h"

namespace zaya {

struct DecodeBenchOptions {
  std::vector<int> batches = {1, 16};
  int prompt = 128;     // tokens per prompt
  int new_tokens = 64;  // tokens decoded per sequence (the first from the prefill's logits)
  uint64_t seed = 1234;
  std::string save_model_dir;  // if set, the benchmarked (random-init) model is written here
};

struct DecodeBenchRow {
  int batch = 0;
  double tokens_per_s = 0;  // decoded tokens of all sequences per second of batched steps
  double step_ms = 0;
  double ttft_ms = 0;             // one prompt's prefill + its first draw (the first sequence's)
  double bytes_per_step = 0;      // weights used + cache read, averaged over the timed steps
  double experts_per_stage = 0;   // distinct experts a step used per MoE stage, averaged
  double bound_tokens_per_s = 0;  // batch / (bytes_per_step / bandwidth)
};

struct DecodeBenchResult {
  std::vector<DecodeBenchRow> rows;
  // STREAM triad at this process's thread count, before and after the decodes; the bound takes
  // the higher: other work on the machine moves the bandwidth (by a third on a shared host)
  // while the decode's own steps hold still, so one measurement could set the bound too low.
  double bandwidth_before_gbs = 0, bandwidth_after_gbs = 0;
  double bandwidth_gbs = 0;  // the bound's: the higher of the two
  int64_t cache_bytes_per_token = 0, mha_cache_bytes_per_token = 0, gqa_cache_bytes_per_token = 0;
};

// The bandwidth measurements and one line per batch size go to `out`.
DecodeBenchResult run_decode_bench(const ModelConfig& config, const DecodeBenchOptions& opt,
                                   std::FILE* out);

}  // namespace zaya
