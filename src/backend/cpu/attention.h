// Causal grouped-query attention, computed in blocks with an online softmax (FlashAttention's
// scheme): memory per head is O(seq · block), never the seq × seq score matrix.
//   q[batch, seq, nq, d], k/v[batch, seq, nk, d]; query head h reads KV head h / (nq / nk).
//   out[batch, seq, nq, d];  lse[batch, nq, seq] = log Σ_j exp(score) is saved for backward.
#pragma once

namespace zaya::cpu {

void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                       int batch, int seq, int nq, int nk, int d, float scale);

// Recomputes the probabilities block by block from lse. Two passes (dq per query block, then
// dk/dv per key block) so that every gradient element is written by one thread in a fixed
// order: bitwise-deterministic and free of atomics.
void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* out,
                        const float* lse, const float* q, const float* k, const float* v, int batch,
                        int seq, int nq, int nk, int d, float scale);

}  // namespace zaya::cpu
