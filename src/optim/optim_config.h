// Optimizer hyper-parameters: the "optim" object of a training config. Every field is optional;
// the defaults below are the ZAYA1-style recipe (Muon for hidden matrices with AdamW RMS matching,
// AdamW for the rest, ZAYA1's bias-balancing controller for the routers).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace zaya {

enum class LrSchedule { Cosine, Wsd, Constant };
const char* lr_schedule_name(LrSchedule s);  // "cosine", "wsd", "constant"

// Global batch grows linearly from start_sequences to the full global batch over ramp_steps.
struct BatchRamp {
  int64_t start_sequences = 1;
  int64_t ramp_steps = 0;  // 0: no ramp
};

struct OptimConfig {
  // Learning-rate schedule (see schedule.h). Muon reuses lr and weight_decay through RMS matching.
  double lr = 3e-4;
  double min_lr = 3e-5;
  int64_t warmup_steps = 0;
  LrSchedule schedule = LrSchedule::Cosine;
  double decay_fraction = 0.2;  // WSD: fraction of total_steps spent in the final linear decay
  // Decoupled weight decay; applied only to tensors with >= 2 dims (see optimizer.h).
  double weight_decay = 0.1;
  // AdamW (embedding, convolutions, norms, biases, scales, temperatures).
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.95;
  double adam_eps = 1e-8;
  // Muon (2-D hidden matrices). muon = false trains those matrices with AdamW too (for
  // comparisons and the AdamW-only equivalence tests).
  bool muon = true;
  double muon_momentum = 0.95;
  bool muon_nesterov = true;
  int64_t muon_ns_steps = 5;
  // Global gradient-norm clipping threshold; 0 turns clipping off.
  double grad_clip = 1.0;
  // ZAYA1 router balancing biases: AdamW without weight decay, eps 1e-8 (router_balancer.h).
  double router_bias_lr = 1e-3;
  double router_bias_beta1 = 0.9;
  double router_bias_beta2 = 0.95;
  std::optional<BatchRamp> batch_ramp;

  // Throws naming `where` and the field (prefix.field) when a value is out of range.
  void validate(const std::string& where, const std::string& prefix = "train.optim") const;
};

// Parses and validates the "optim" object. `where` names the file ("config.json"); `prefix` is the
// JSON path of the object in it, so an error reads
//   config.json: unknown field 'train.optim.lr_max'
OptimConfig optim_config_from_json(const nlohmann::json& j, const std::string& where,
                                   const std::string& prefix = "train.optim");

}  // namespace zaya
