// CCA across chunk boundaries under context parallelism (model/context_shard.h). Its two causal
// convolutions (kernel 2 each) read 2 positions back and its value shift 1, so each chunk needs the
// last two rows of the chunk before it in sequence order: the halo. Rank r's first chunk (r)
// follows rank r−1's first chunk; its second chunk (2N−1−r) follows rank r+1's second chunk, and
// at r = N−1 its own first chunk. Chunk 0 has no predecessor: a zero halo, which is exactly the
// zero padding of a whole sequence. The gradient of the halo goes back the same way.
//
// Halo rows are whole rows of the fused projection [q0 ‖ k0 ‖ v_cur ‖ v_prev_raw] (P floats):
// the convolutions read the q0 ‖ k0 part of both rows, the value shift v_prev_raw of the last.
#pragma once

#include "model/context_shard.h"

namespace zaya {

constexpr int kHaloRows = 2;

// halo[which] ← [B, 2, P]: the rows before local chunk `which`. proj is [B, L, P].
void cca_halo_forward(float* const halo[2], const float* proj, int B, int P,
                      const ContextShard& shard);
// dproj (the last 2 rows of each local chunk) += the halo gradients of the chunks after them.
void cca_halo_backward(float* dproj, const float* const dhalo[2], int B, int P,
                       const ContextShard& shard);

}  // namespace zaya
