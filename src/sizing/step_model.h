// Predicted time of one optimizer step of `zaya train`, split the way the trainer spends it:
//  - gemm: every product of every micro-batch (model/model_gemms.h), each priced on the
//    profile's GEMM curve;
//  - other: the non-GEMM work of the micro-batches: activation bytes (train/train_memory.h) ×
//    the profile's time per byte + causal attention scores × its time per score + logits × the
//    loss's time per logit;
//  - optimizer: Muon's Newton–Schulz products (this rank's share) on the GEMM curve + the
//    elementwise passes over the rank's range (AdamW/momentum/clipping, ~10 fp32 streams) and the
//    gradient zeroing over all parameters, at the STREAM bandwidth;
//  - comm (world > 1): ZeRO-1's reduce-scatter of the gradients and all-gather of the weights, in
//    2^20-float buckets, and Muon's piece exchange, at the profile's bus bandwidth + latency.
// The trainer does not overlap them yet, so they add up.
#pragma once

#include <cstdint>
#include <string>

#include "model/config.h"
#include "model/recompute.h"
#include "sizing/hardware_profile.h"

namespace zaya {

struct TrainPlan {
  int64_t micro_batch = 8;
  int64_t seq = 256;
  int64_t global_batch = 32;  // sequences per optimizer step over all ranks
  int world = 1;
  int ranks_per_machine = 0;  // CPU: ranks sharing the machine's cores (0: all of `world`)
  int ns_steps = 5;           // Newton–Schulz iterations (optim default)
  // train.recompute: the products it repeats (model_info.h's recompute_flops_per_token) add to
  // the products' time in proportion; the non-GEMM work it repeats, the buffers it makes again,
  // at the forward's third of the measured fwd+bwd rate per activation byte.
  RecomputePlan recompute{};
};

struct StepTime {
  int threads = 0;                                      // per rank (CPU)
  int64_t micro_batches = 0;                            // per rank per optimizer step
  double gemm = 0, other = 0, optimizer = 0, comm = 0;  // seconds per optimizer step
  double total() const { return gemm + other + optimizer + comm; }
};

// Checks that global_batch is a multiple of micro_batch × world (as zaya train requires).
StepTime predict_step(const ModelConfig& c, const TrainPlan& plan, const HardwareProfile& p);

// The non-GEMM work of one micro-batch the profile's two rates apply to.
struct OtherWork {
  double act_bytes = 0;  // the arena's high-water mark (forward + backward) less the logits
  double scores = 0;     // causal attention scores: attention stages × B × q heads × S(S+1)/2
  double logits = 0;     // B × S × vocab (cross-entropy forward + backward)
};
OtherWork other_work(const ModelConfig& c, int64_t micro_batch, int64_t seq);

// Seconds of one micro-batch's products (forward and both backward ones) at these rates.
double micro_batch_gemm_seconds(const ModelConfig& c, int64_t micro_batch, int64_t seq,
                                const HardwareProfile& p, const ProfileRates& r);

}  // namespace zaya
