// The matrix products of one training micro-batch of a ZAYA1 config, as the CPU backend issues
// them: what `zaya bench gemm --shapes model:CONFIG` times and what `zaya size` prices.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace zaya {

struct GemmShape {
  std::string name;  // e.g. "cca.qkv fwd"
  int m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  int64_t count = 1;  // calls of this shape per micro-batch (over all stages)
  double flops() const { return 2.0 * m * n * k; }
};

// Forward, input-gradient and weight-gradient products of one micro-batch of batch × seq tokens.
// Routed tokens are assumed spread evenly over the experts and the skip route (what the balancing
// biases aim for); attention is causal in 64 × 64 blocks (backend/cpu/attention.cpp).
std::vector<GemmShape> model_gemms(const ModelConfig& c, int batch, int seq);

// Muon's Newton–Schulz products of one optimizer step (per matrix and iteration: X·Xᵀ, A·A,
// B·X, on the orientation with fewer rows).
std::vector<GemmShape> muon_gemms(const ModelConfig& c, int ns_steps);

}  // namespace zaya
