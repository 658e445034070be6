// What a training step keeps of each stage's forward for its backward (ZayaModel::set_recompute).
#pragma once

#include <map>
#include <string>

namespace zaya {

enum class Recompute {
  // Every buffer the backward reads stays from the forward.
  kNone,
  // The products' outputs stay (the projections, the attention output, the router's and the
  // experts' products) and the routes; what is cheap to make again from them — the norms, the
  // GELUs and SwiGLU, CCA's convolutions, q-k-mean, L2 norm and RoPE, the router softmax, the
  // experts' gathered inputs — is made again just before each stage's backward. A few percent
  // more compute for about half the activations.
  kSelective,
  // Only each stage's input and output stay (and a MoE stage's routes and router state); the
  // whole stage runs forward again before its backward: one more forward.
  kFull,
};

// "none", "selective", "full" (train.recompute; true and false are "full" and "none").
const std::map<std::string, Recompute>& recompute_names();
const char* recompute_name(Recompute r);

// The mode of each kind of stage: the attention (CCA) stages and the MoE stages may keep
// differently (train.recompute {"attention": ..., "moe": ...}); one mode is both.
struct RecomputePlan {
  Recompute attention = Recompute::kNone, moe = Recompute::kNone;
  RecomputePlan() = default;
  RecomputePlan(Recompute both) : attention(both), moe(both) {}  // one mode for every stage
  RecomputePlan(Recompute attention_stages, Recompute moe_stages)
      : attention(attention_stages), moe(moe_stages) {}
  Recompute for_stage(bool attention_stage) const { return attention_stage ? attention : moe; }
  bool operator==(const RecomputePlan&) const = default;
};
// "selective" when both kinds agree, else "attention full, moe selective".
std::string recompute_plan_name(const RecomputePlan& plan);

}  // namespace zaya
