// Causal grouped-query attention, computed in blocks with an online softmax (FlashAttention's
// scheme): memory per head is O(seq · block), never the seq × seq score matrix.
//   q[batch, seq, nq, d], k/v[batch, seq, nk, d]; query head h reads KV head h / (nq / nk).
//   out[batch, seq, nq, d];  lse[batch, nq, seq] = log Σ_j exp(score) is saved for backward.
#pragma once

#include "backend/cpu/cpu_path_target.h"

#include <cstddef>

#include "backend/op_types.h"  // AttentionBlock

namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                       int batch, int seq, int nq, int nk, int d, float scale);

// Recomputes the probabilities block by block from lse. Two passes (dq per query block, then
// dk/dv per key block) so that every gradient element is written by one thread in a fixed
// order: bitwise-deterministic and free of atomics.
void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* out,
                        const float* lse, const float* q, const float* k, const float* v, int batch,
                        int seq, int nq, int nk, int d, float scale);

// One block of a sharded attention (ring attention, model/ring_attention.h; AttentionBlock in
// backend/op_types.h says which).
// out (at q's strides) = softmax(q·kᵀ·scale)·v over this block alone; lse[batch, nq, q_len].
void attention_block_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                             const AttentionBlock& blk);
// D[batch, nq, q_len] = Σ_c dout·out per query row: the softmax-backward row term, computed once
// from the merged output and shared by every block of those queries.
void attention_row_dot(float* D, const float* dout, const float* out, const AttentionBlock& blk);
// Adds this block's share to dq, dk, dv (any may be null), given the lse and D of the queries
// over all their blocks: P = exp(S − lse) is then the block's slice of the full softmax.
void attention_block_backward(float* dq, float* dk, float* dv, const float* dout, const float* D,
                              const float* lse, const float* q, const float* k, const float* v,
                              const AttentionBlock& blk);

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
