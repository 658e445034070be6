// ZAYA1's bias-balancing controller for the MoE routers. Routing is argmax(p + b) over X experts
// and the skip route (index X); b is `...router.balancing_biases` (OptimGroup::Buffer, no
// gradient from the loss). After each optimizer step, per MoE stage:
//   grad_e = (tokens routed to e over the global batch)/(all tokens) − 1/(X + 1)
//   b ← AdamW(b, grad; lr = router_bias_lr, router_bias_beta1/2, eps 1e-8, no weight decay)
// so an overloaded route's bias falls and an idle route's bias rises.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/params.h"
#include "optim/optim_config.h"

namespace zaya {

// Route counts of one MoE stage, accumulated over the micro-batches of a step (index X = skip).
using RouteCounts = std::vector<int64_t>;

class RouterBalancer {
 public:
  RouterBalancer(const ParamRegistry& registry, const OptimConfig& config);

  // counts[k] belongs to the k-th MoE stage in registry order (global stage stage_of(k)).
  void update(ParamStore& store, const std::vector<RouteCounts>& counts);
  void update(float* weights, const std::vector<RouteCounts>& counts);

  int num_moe_stages() const { return int(stages_.size()); }
  int stage_of(int k) const { return stages_[size_t(k)].stage; }  // global stage index (odd)
  const std::string& bias_name(int k) const { return stages_[size_t(k)].name; }
  int64_t num_routes() const { return routes_; }

  // Checkpointing: "router_bias_exp_avg", "router_bias_exp_avg_sq" ([moe stages, routes]).
  std::map<std::string, Tensor> state_tensors() const;
  int64_t step_count() const { return step_count_; }
  void load_state(const std::map<std::string, Tensor>& state, int64_t step_count);

 private:
  struct Stage {
    int stage;
    size_t offset;  // of the biases in the flat weight buffer
    std::string name;
  };
  std::vector<Stage> stages_;
  int64_t routes_ = 0;
  OptimConfig config_;
  Tensor exp_avg_, exp_avg_sq_;
  int64_t step_count_ = 0;
};

// Adds the routes chosen in one micro-batch (e.g. ZayaModel::routes(stage)) to `counts`.
void accumulate_routes(RouteCounts& counts, std::span<const int32_t> routes);

// Load statistics of one stage for logging.
struct ExpertLoad {
  std::vector<double> fractions;  // per route, summing to 1 (skip route last)
  double max_min_ratio = 0;       // over the routed experts (skip excluded); inf if one is idle
  double skip_fraction = 0;       // share of tokens on the skip route
};
ExpertLoad expert_load(const RouteCounts& counts);

}  // namespace zaya
