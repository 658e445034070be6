// The ZAYA1 optimizer: Muon for OptimGroup::Muon matrices, AdamW for OptimGroup::AdamW tensors,
// OptimGroup::Buffer tensors (router balancing biases; see router_balancer.h) untouched.
//
// One step, given the scheduled lr:
//  1. global gradient norm over every trainable gradient, fp64, in fixed chunks summed in order;
//  2. if grad_clip > 0 and norm > grad_clip, gradients are scaled in place by grad_clip/norm;
//  3. AdamW (t = step_count): W ← W·(1 − lr·wd);  m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²;
//       W ← W − lr·(m/(1−β1ᵗ)) / (sqrt(v/(1−β2ᵗ)) + eps);
//     Muon, per 2-D matrix [rows, cols] (each expert's fc1/fc2 separately):
//       buf ← β·buf + (1−β)·g;  d = (1−β)·g + β·buf (Nesterov) or buf;
//       O = newton_schulz(d);  W ← W·(1 − lr·wd) − lr·0.2·sqrt(max(rows, cols))·O
//     (0.2·sqrt(max) is Moonlight's AdamW RMS matching, so Muon shares AdamW's lr and wd).
// Weight decay applies to tensors with >= 2 dims (Muon matrices, the embedding, conv weights) and
// not to 1-D tensors (norms, biases, residual scales, key temperatures): decaying those pulls
// gains towards 0 rather than regularising a linear map.
//
// State lives in flat fp32 buffers with the registry's layout (a tensor's state is at its weight
// offset), so ZeRO-1 and checkpoints can cut it by offset: "exp_avg" holds AdamW's m and Muon's
// momentum buffer, "exp_avg_sq" AdamW's v (zero for Muon and Buffer tensors).
// Elementwise work is parallel with OpenMP (order-independent); reductions use fixed partitions
// and the Muon matrices run one after another, so a step is bitwise reproducible.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/params.h"
#include "optim/newton_schulz.h"
#include "optim/optim_config.h"

namespace zaya {

class Optimizer {
 public:
  Optimizer(const ParamRegistry& registry, const OptimConfig& config);
  // Any layout of specs (offset, numel, shape, group) over a flat buffer of total_floats.
  Optimizer(std::vector<ParamSpec> specs, size_t total_floats, const OptimConfig& config);

  // One update with learning rate `lr`; returns the global gradient norm before clipping. When
  // that norm is not finite the weights and state are left untouched (the caller decides).
  float step(ParamStore& store, double lr);
  float step(float* weights, float* grads, double lr);

  // Checkpointing: flat views of the state ("exp_avg", "exp_avg_sq", each [total_floats]) and the
  // number of steps taken (AdamW's bias-correction t).
  std::map<std::string, Tensor> state_tensors() const;
  int64_t step_count() const { return step_count_; }
  // Copies state saved by state_tensors()/step_count(); names and sizes must match.
  void load_state(const std::map<std::string, Tensor>& state, int64_t step_count);

  const OptimConfig& config() const { return config_; }

 private:
  double grad_norm(const float* grads) const;
  void adamw_update(const ParamSpec& p, float* w, const float* g, double lr);
  void muon_update(const ParamSpec& p, float* w, const float* g, double lr);

  std::vector<ParamSpec> specs_;
  size_t total_ = 0;
  OptimConfig config_;
  Tensor exp_avg_, exp_avg_sq_;
  int64_t step_count_ = 0;
  std::vector<float> direction_;  // Muon scratch: the matrix handed to Newton–Schulz
  NsWorkspace ns_;
};

}  // namespace zaya
