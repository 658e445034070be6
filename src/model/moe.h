// The ZAYA1 MoE block of every odd stage: the MLP router with exponential depth averaging (EDA),
// top-1 routing over X experts + 1 skip route, and SwiGLU experts. §2 of docs/model.md.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "core/arena.h"
#include "model/config.h"
#include "model/stored_activations.h"
#include "model/tensor_views.h"

namespace zaya {

// A MoE stage's tensors: its weights (MoeWeights, read) or their gradients (MoeGrads, added
// into), the same fields for both so that one binding fills either.
template <class Views>
struct MoeTensors {
  using Product = typename Views::Product;
  using Plain = typename Views::Plain;
  Product down_w;            // [R, E]
  Plain down_b;              // [R]
  Plain states_scale;        // [R] γ of EDA; nullptr on the first MoE stage (no EDA)
  Plain rms_w;               // [R]
  Product mlp0_w;            // [R, R]
  Plain mlp0_b;              // [R]
  Product mlp2_w;            // [R, R]
  Plain mlp2_b;              // [R]
  Product mlp4_w;            // [X+1, R]
  Plain balancing_biases;    // [X+1], selection only (no gradient: its MoeGrads slot unused)
  std::vector<Product> fc1;  // X × [2F, E]
  std::vector<Product> fc2;  // X × [E, F]
};
using MoeWeights = MoeTensors<WeightViews>;
using MoeGrads = MoeTensors<GradViews>;

struct MoeActivations {
  const float* x = nullptr;           // [N, E] normalised stage input (caller-owned)
  const float* state_in = nullptr;    // [N, R] previous MoE stage's router state, or nullptr
  float* state = nullptr;             // [N, R] post-EDA, pre-norm router state (passed on)
  float* rstd = nullptr;              // [N]
  float* hn = nullptr;                // [N, R]
  float *m1_pre, *m1, *m2_pre, *m2;   // [N, R] each
  float* logits = nullptr;            // [N, X+1] the router's, before the softmax
  float* probs = nullptr;             // [N, X+1]
  int32_t* route = nullptr;           // [N] chosen route, X = skip
  int32_t* order = nullptr;           // [N] tokens sorted by route (stable)
  int32_t* offsets = nullptr;         // [X+2] segment starts of `order`
  std::vector<int32_t> host_offsets;  // the same, copied to the host for the expert products
  float* xg = nullptr;                // [n_exp, E] gathered expert inputs
  float* h1 = nullptr;                // [n_exp, 2F]
  float* sw = nullptr;                // [n_exp, F]
  float* y = nullptr;                 // [n_exp, E] expert outputs before the gate
};

// out[N, E] = MoE(x); act.state receives this stage's router state for the next MoE stage.
// held_route[N], when given, replaces the top-1 choice (the gates stay the router's probabilities
// of those routes): finite-difference tests hold routes fixed across a near-tie, where top-1 is
// not differentiable.
// With `transient` (selective recompute), the buffers that are cheap to make again — rstd, hn,
// m1, m2, probs, xg and sw: the router's norm, GELUs and softmax, the experts' gathered inputs
// and SwiGLU — come from it instead of `arena` and are forgotten on return (the caller frees
// them); act keeps the products' outputs (state, m1_pre, m2_pre, logits, h1, y) and the routes,
// and moe_rebuild makes the rest again before moe_backward.
void moe_forward(float* out, MoeActivations& act, const float* x, const float* state_in,
                 const MoeWeights& w, const ModelConfig& c, int N, Arena& arena,
                 const int32_t* held_route = nullptr, const Backend& be = cpu_backend(),
                 Arena* transient = nullptr);
// The buffers a forward with `transient` forgot, from the kept ones and act.x, in `arena`: the
// same ops on the same values, so the backward after it is bitwise the one without.
void moe_rebuild(MoeActivations& act, const MoeWeights& w, const ModelConfig& c, int N,
                 Arena& arena, const Backend& be);
// dx += ∂/∂x; dstate_in += ∂/∂state_in (if state_in was given); dstate is the gradient arriving
// at this stage's router state from later stages (may be nullptr).
// The buffers of `act` the backward reads, for bf16 activation storage
// (model/stored_activations.h): the experts' in bf16, the router's and the routes as they are.
void visit_saved(MoeActivations& act, const ModelConfig& c, int N, SavedBuffers& visit);

void moe_backward(float* dx, float* dstate_in, MoeGrads& g, const float* dout, const float* dstate,
                  const MoeActivations& act, const MoeWeights& w, const ModelConfig& c, int N,
                  Arena& arena, const Backend& be = cpu_backend());

}  // namespace zaya
