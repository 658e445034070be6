// The CPU ops of the model's own steps, the ones that are neither a layer of the op set nor a
// product: the embedding, CCA's q-k-mean skip and value shift, EDA's router-state scaling, and
// the MoE layer's routing (top-1, the sort of tokens by route, gather, the gated combine with the
// skip route, scatter). model/cca.cpp and model/moe.cpp call them through the Backend
// (backend/backend.h); the definitions are in those files' comments.
#pragma once

#include "backend/cpu/cpu_path_target.h"

#include <cstddef>
#include <cstdint>

namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

// dst[r·dst_stride + j] = src[r·src_stride + j] for j < width; dst[0 : n] = value; dst += src.
void copy_rows(float* dst, size_t dst_stride, const float* src, size_t src_stride, int rows,
               int width);
void fill(float* dst, size_t n, float value);
void add_into(float* dst, const float* src, size_t n);

// out[t] = table[tokens[t]] (rows of e); the backward adds dout[t] to dtable[tokens[t]] in token
// order (tokens repeat: the order is what makes it deterministic). `vocab`: the table's rows,
// every token in [0, vocab) (a GPU sorts the tokens by their bits below vocab only).
void embedding_forward(float* out, const float* table, const int32_t* tokens, int n, int e);
void embedding_backward(float* dtable, const float* dout, const int32_t* tokens, int n, int e,
                        int vocab);

// CCA, whole sequences of `seq` rows: proj rows are [q0 (nq·d) | k0 (nk·d) | v_cur | v_prev]
// (the halves nk·d/2 each), qk1 rows [q1 | k1].
//   q1[h] += (q0[h] + k0[j(h)]) / 2;   k1[j] += mean_{h in j}(q0[h]) / 2 + k0[j] / 2;
//   v = [v_cur(t) ‖ v_prev(t − 1)], zero at a sequence's first row.
// The backward overwrites dproj from dqk1 (also the convolutions' output gradient), du (their
// input gradient) and dv.
void cca_mix_forward(float* qk1, float* v, const float* proj, int n, int seq, int nq, int nk,
                     int d);
void cca_mix_backward(float* dproj, const float* dqk1, const float* du, const float* dv, int n,
                      int seq, int nq, int nk, int d);

// EDA: state[n, r] += scale ⊙ state_in; the backward adds Σ_t dstate ⊙ state_in to dscale and
// scale ⊙ dstate to dstate_in (either may be nullptr).
void eda_forward(float* state, const float* scale, const float* state_in, int n, int r);
void eda_backward(float* dscale, float* dstate_in, const float* dstate, const float* state_in,
                  const float* scale, int n, int r);

// ZAYA1's top-1 choice for one token: argmax over routes of probs[e] + biases[e] (the balancing
// biases only select; the gate stays the probability), exact ties to the lowest index.
inline int top1_route(const float* probs, const float* biases, int routes) {
  int best = 0;
  float best_v = probs[0] + biases[0];
  for (int e = 1; e < routes; ++e) {
    const float v = probs[e] + biases[e];
    if (v > best_v) best = e, best_v = v;
  }
  return best;
}

// route[t] = top1_route of each token's row of probs.
void top1_routes(int32_t* route, const float* probs, const float* biases, int n, int routes);
// order[n]: the tokens grouped by route, in token order inside a route; offsets[routes + 1]: the
// groups' starts (a stable counting sort: deterministic, dropless).
void sort_by_route(int32_t* order, int32_t* offsets, const int32_t* route, int n, int routes);
// out[i] = in[order[i]]; scatter_add_rows: out[order[i]] += in[i] (order is a permutation).
void gather_rows(float* out, const float* in, const int32_t* order, int rows, int width);
void scatter_add_rows(float* out, const float* in, const int32_t* order, int rows, int width);
// out[t] = probs[t, route[t]] · (y[i] for the first n_exp tokens of order, x[t] for the skip
// route). The backward writes dprobs at each token's route (dout · src), overwrites dy[i] with
// gate · dout for expert tokens and adds gate · dout to dx for skipped ones.
void moe_combine_forward(float* out, const float* y, const float* x, const float* probs,
                         const int32_t* route, const int32_t* order, int n, int n_exp, int e,
                         int routes);
void moe_combine_backward(float* dprobs, float* dy, float* dx, const float* dout, const float* y,
                          const float* x, const float* probs, const int32_t* route,
                          const int32_t* order, int n, int n_exp, int e, int routes);

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
