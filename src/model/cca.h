// Compressed Convolutional Attention (CCA/CCGQA), the attention block of every even ZAYA1 stage.
// Forward and backward side by side on plain buffers; the math is §1.2 of
// docs/model.md, written out step by step in cca.cpp.
#pragma once

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "core/arena.h"
#include "model/config.h"
#include "model/context_shard.h"
#include "model/stored_activations.h"
#include "model/tensor_views.h"

namespace zaya {

// A CCA stage's tensors: its weights (CcaWeights, read) or their gradients (CcaGrads, added
// into), the same fields for both so that one binding fills either.
template <class Views>
struct CcaTensors {
  using Product = typename Views::Product;
  using Plain = typename Views::Plain;
  Product qkvv;    // [Dq + Dk + Dk/2 + Dk/2, E]: linear_q, linear_k, val_proj1, val_proj2
  Plain conv0_w;   // [C, 1, 2] depthwise
  Plain conv0_b;   // [C]
  Plain conv1_w;   // [C, d, 2] grouped, one group per head
  Plain conv1_b;   // [C]
  Plain temp;      // [n_k]
  Product o_proj;  // [E, Dq]
};
using CcaWeights = CcaTensors<WeightViews>;
using CcaGrads = CcaTensors<GradViews>;

// What forward keeps for backward (all in the step's arena).
struct CcaActivations {
  const float* x = nullptr;    // [N, E] the stage's normalised input (owned by the caller)
  float* proj = nullptr;       // [N, C + Dk]: q0 ‖ k0 ‖ v_cur ‖ v_prev_raw
  float* u = nullptr;          // [N, C] the packed q0 ‖ k0 fed to the convs
  float* a = nullptr;          // [B, S+1, C] depthwise conv output
  float* qk1 = nullptr;        // [N, n_q + n_k, d] after q-k-mean, before L2 norm
  float* inv_norm = nullptr;   // [N, n_q + n_k]
  float* head_temp = nullptr;  // [n_q + n_k]: 1 for query heads, temp for key heads
  float* q = nullptr;          // [N, n_q, d] normalised + RoPE
  float* k = nullptr;          // [N, n_k, d] normalised × temp + RoPE
  float* v = nullptr;          // [N, n_k, d]
  float* att = nullptr;        // [N, n_q, d] attention output
  float* lse = nullptr;        // [B, n_q, S]; per local chunk under context parallelism
  // Context parallelism only (model/cca_halo.h): per local chunk, the 2 halo rows of the fused
  // projection [B, 2, P], and the convolutions' input and stage-A output over halo + chunk.
  float* halo[2] = {nullptr, nullptr};
  float* u_ext[2] = {nullptr, nullptr};  // [B, 2 + len, C]
  float* a_ext[2] = {nullptr, nullptr};  // [B, 3 + len, C]
};

// The widths of a CCA stage, as ints for the loops (cca.cpp, cca_decode.cpp).
struct CcaDims {
  int E, d, nq, nk, g, Dq, Dk, C, P, H, rot;  // P: width of the fused projection; H: nq + nk
  explicit CcaDims(const ModelConfig& c)
      : E(int(c.hidden_size)),
        d(int(c.head_dim)),
        nq(int(c.num_q_heads)),
        nk(int(c.num_kv_heads)),
        g(nq / nk),
        Dq(nq * d),
        Dk(nk * d),
        C(Dq + Dk),
        P(C + Dk),
        H(nq + nk),
        rot(int(c.rotary_dim())) {}
};

// Precomputed RoPE tables for one sequence length.
struct RopeTables {
  const float* cos = nullptr;  // [S, rot/2]
  const float* sin = nullptr;
};

// out[N, E] = CCA(x). N = B·S tokens, sequences of length S laid out one after another. With a
// context shard, S is the shard's local_len(): this rank's rows of each sequence, its two chunks
// (model/context_shard.h); the rope tables are then those of the local rows' positions.
// With `transient` (selective recompute), the buffers between the two products — u, a, qk1,
// v, head_temp, inv_norm, q, k and their temporaries — come from it instead of `arena` and are
// forgotten on return (the caller frees them); act keeps x, proj, the halos, att and lse, and
// cca_rebuild makes the rest again before cca_backward.
void cca_forward(float* out, CcaActivations& act, const float* x, const CcaWeights& w,
                 const RopeTables& rope, const ModelConfig& c, int B, int S, Arena& arena,
                 const ContextShard* shard = nullptr, const Backend& be = cpu_backend(),
                 Arena* transient = nullptr);
// The buffers a forward with `transient` forgot, from act.x, act.proj and act.halo, in `arena`:
// the same ops on the same values, so the backward after it is bitwise the one without.
void cca_rebuild(CcaActivations& act, const CcaWeights& w, const RopeTables& rope,
                 const ModelConfig& c, int B, int S, Arena& arena, const ContextShard* shard,
                 const Backend& be);
// dx[N, E] += ∂/∂x;  parameter gradients accumulate into g.
// The buffers of `act` the backward reads, for bf16 activation storage
// (model/stored_activations.h): whole sequences only (the halo buffers of context parallelism are
// not visited).
void visit_saved(CcaActivations& act, const ModelConfig& c, int B, int S, SavedBuffers& visit);

void cca_backward(float* dx, CcaGrads& g, const float* dout, const CcaActivations& act,
                  const CcaWeights& w, const RopeTables& rope, const ModelConfig& c, int B, int S,
                  Arena& arena, const ContextShard* shard = nullptr,
                  const Backend& be = cpu_backend());

}  // namespace zaya
