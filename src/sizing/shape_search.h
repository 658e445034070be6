// `zaya size`: ZAYA1 shapes for a goal on a hardware profile, each with its parameter counts,
// memory per rank, largest micro-batch, predicted step time and throughput. The rules the
// candidates follow are in sizing_rules() (printed by `zaya size --explain`, sources in
// docs/sizing.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/model_info.h"
#include "model/recompute.h"
#include "sizing/hardware_profile.h"
#include "sizing/step_model.h"
#include "train/train_memory.h"

namespace zaya {

struct SizeGoal {
  double active_params = 0;  // non-embedding, one expert per MoE stage (ZAYA1's "760M active")
  double total_params = 0;   // non-embedding, all experts (ZAYA1's "8.3B"); 0: any
  double flops = 0;          // compute budget (6·N·T convention), with tokens: active = F / 6T
  double gpu_hours = 0;      // device-hours budget, with tokens: the largest shape that fits
  double tokens = 0;         // training tokens
  int64_t vocab = 0;         // tokenizer size, padded to a multiple of 64
  int64_t experts = 16;
  int world = 1;              // ranks (GPUs, or CPU processes)
  int ranks_per_machine = 0;  // CPU: ranks sharing one machine's cores (0: all)
  int64_t seq = 0;            // 0: 4096 on a GPU, 256 on a CPU
  int64_t global_batch = 0;   // sequences per step (0: one micro-batch per rank)
  int64_t micro_batch = 0;    // 0: the largest that fits (a power of two, at most 64)
  RecomputePlan recompute{};  // train.recompute: the activations kept, the forward work repeated
};

struct Candidate {
  ModelConfig config;
  ModelInfo info;
  int64_t seq = 0;              // tokens per sequence
  int64_t micro_batch = 0;      // used for the prediction
  int64_t max_micro_batch = 0;  // the largest power of two that fits in memory (0: none)
  int64_t global_batch = 0;
  TrainMemory memory;  // at micro_batch
  StepTime step;
  double tokens_per_s = 0;  // whole job
  double tokens_per_day = 0;
  double mfu = 0;               // model FLOPs over the profile's peak (0 if unknown)
  double decode_ms = 0;         // memory-bound decode: active weights (bf16) per token
  double hours_for_tokens = 0;  // wall-clock hours for goal.tokens (0 if none)
  std::string note;             // why it was ranked where it is, or what does not fit
};

// The rules as text: one entry per rule, "rule — why (source)".
std::vector<std::string> sizing_rules(const HardwareProfile& p);

// Evaluates one config under the goal's world, batch and sequence (memory, max micro-batch, step).
Candidate evaluate_config(const ModelConfig& c, const SizeGoal& goal, const HardwareProfile& p);

// Shapes that follow the rules, best first (closest to the parameter target; then throughput),
// at most `limit`.
std::vector<Candidate> propose_shapes(const SizeGoal& goal, const HardwareProfile& p, int limit);

}  // namespace zaya
