// Ring attention: causal GQA attention over sequences spread across a context group
// (model/context_shard.h). Each rank keeps its queries; the keys and values of every rank's two
// chunks travel once around the ring, and each rank merges the blocks it may see with the
// online-softmax rule (out, lse). Which blocks: chunk a sees chunk b fully when b < a and
// causally when b == a, so the diagonal blocks are the only masked ones. The next transfer is
// posted before a block computes and waited for after it (how far MPI moves it meanwhile depends
// on the transport: docs/long-context.md).
//
// Backward: the same ring again. Given the merged lse and D = rowsum(dout ⊙ out), each block's
// gradient is exact on its own (the backend's attention_block_* ops), so dq stays home while dK and
// dV travel with K and V, collecting every rank's share, and arrive home after N hops.
//
// Layouts (L = shard.local_len(), the first chunk's rows then the second's):
//   q, out, dout, dq: [B, L, nq, d];  k, v, dk, dv: [B, L, nk, d];
//   lse: per chunk [B, nq, len(chunk)], the first chunk's block then the second's.
#pragma once

#include "backend/backend.h"
#include "core/arena.h"
#include "model/context_shard.h"

namespace zaya {

struct RingAttentionDims {
  int B, nq, nk, d;
  float scale;
};

void ring_attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                            const RingAttentionDims& dims, const ContextShard& shard, Arena& arena,
                            const Backend& be);
// Adds to dq, dk, dv.
void ring_attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* out,
                             const float* lse, const float* q, const float* k, const float* v,
                             const RingAttentionDims& dims, const ContextShard& shard, Arena& arena,
                             const Backend& be);

}  // namespace zaya
