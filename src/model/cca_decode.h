// CCA for decoding: the new token of each of several sequences at once, against caches of past
// tokens, with the same math as cca_forward (cca.cpp) and nothing recomputed for past tokens.
//
// What a CCA stage must remember of a sequence (and nothing else):
//  - the keys and values of every past token, in the compressed latent space: n_k·d floats each
//    (the 8× saving over a standard cache: ZAYA1-base keeps 2·256 floats per token and stage where
//    multi-head attention over the hidden size would keep 2·2048). They live in the blocks of a
//    KvBlockPool (infer/kv_blocks.h);
//  - the convolution window: the last two rows of the packed pre-convolution projection q0 ‖ k0,
//    since the two stacked kernel-2 convolutions give position t a receptive field of t-2..t;
//  - the value shift: the previous token's second value projection (v_prev_raw).
//
// A decode step of a stage is split where the cache is read, so the attention over the cache can
// be one rank's shard of it (tree attention, infer/tree_attention.h):
//   cca_decode_project  x → this token's query, key and value (key and value into the cache),
//                       the state moved one position on;
//   (attention of the query over the cached keys and values: infer/kv_attention.h)
//   cca_decode_output   attention output → o_proj.
// Every product is cpu::rows_matmul_forward, so a sequence's rows do not depend on the others.
#pragma once

#include <cstdint>
#include <vector>

#include "core/arena.h"
#include "model/cca.h"
#include "model/config.h"

namespace zaya {

// The constant-size state of one sequence at one CCA stage.
struct CcaConvState {
  std::vector<float> window;      // [2, C]: q0 ‖ k0 of positions t-2 and t-1 (zeros before 0)
  std::vector<float> v_prev_raw;  // [n_k·d / 2]: val_proj2 of position t-1 (zeros before 0)
};

void cca_conv_state_init(CcaConvState& s, const ModelConfig& c);

// Bytes of keys and values per position and stage (the part that grows with the context).
inline int64_t cca_kv_bytes_per_token(const ModelConfig& c) {
  return 2 * c.kv_dim() * 4;
}

// The state after position seq-1 of sequence b of a forward of `batch` sequences of `seq` tokens
// (from the activations cca_forward kept).
void cca_conv_state_from_forward(CcaConvState& s, const CcaActivations& act, const ModelConfig& c,
                                 int batch, int seq, int b);

// One decode row: a sequence's new token at `position`.
struct CcaDecodeRow {
  CcaConvState* state;
  const float* rope_cos;  // [rot/2] RoPE rows of this position
  const float* rope_sin;
  float* k_slot;  // [n_k·d] where this position's key goes; nullptr: another rank keeps it
  float* v_slot;
};

// For rows r < n: q[r] ([n_q·d], normalised, RoPE applied) of the token whose normalised stage
// input is x[r] ([E]); its key and value are written to the row's slots; the states advance.
void cca_decode_project(float* q, const CcaDecodeRow* rows, const float* x, int n,
                        const CcaWeights& w, const ModelConfig& c, Arena& arena);

// out[n, E] = o_proj(att[n, n_q·d]).
void cca_decode_output(float* out, const float* att, int n, const CcaWeights& w,
                       const ModelConfig& c);

}  // namespace zaya
