// Sizes a user plans with: parameter counts, FLOPs per token and the CCA KV-cache footprint.
#pragma once

#include <cstdint>
#include <string>

#include "model/config.h"
#include "model/recompute.h"

namespace zaya {

struct ModelInfo {
  int64_t total_params = 0;      // every trained tensor (balancing biases are counted apart)
  int64_t embedding_params = 0;  // V·E (tied: also the LM head)
  int64_t non_embedding_params = 0;
  int64_t expert_params = 0;         // all experts of all MoE stages
  int64_t active_non_embedding = 0;  // one expert per MoE stage instead of all of them
  int64_t buffer_params = 0;         // balancing biases (no gradient)
  // Training FLOPs per token at sequence length seq (llm.c convention, forward + backward):
  // 6·(active non-embedding + LM head) + 6·n_attn·(n_q·d)·seq for attention scores/values.
  double train_flops_per_token = 0;
  double forward_flops_per_token = 0;
  int64_t kv_cache_values_per_token = 0;  // post-RoPE K + V of every attention stage
  int64_t conv_state_values_per_seq = 0;  // constant-size CCA state (conv window + value shift)
};

ModelInfo compute_model_info(const ModelConfig& c, int64_t seq);
// The forward FLOPs per token a training step runs again in its backward under `recompute`
// (model/recompute.h), by the same convention: full recompute repeats each such stage's
// forward (2 × its active parameters, and for an attention stage 2 × n_q·d·seq); selective
// repeats CCA's convolutions (2 × their weights). The elementwise ops selective repeats (norms,
// GELU, SwiGLU, softmax, RoPE, the experts' gathers) count for nothing, as in the FLOPs line.
double recompute_flops_per_token(const ModelConfig& c, int64_t seq, const RecomputePlan& recompute);
std::string format_model_info(const ModelConfig& c, int64_t seq);
std::string with_commas(int64_t v);

}  // namespace zaya
