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
// be one rank's shard of it (tree attention, infer/kv_attention.h):
//   cca_decode_project  x → this token's query, key and value (key and value into the cache),
//                       the state moved one position on;
//   (attention of the query over the cached keys and values: infer/kv_attention.h)
//   cca_decode_output   attention output → o_proj.
// Everything runs on the model's backend (backend/backend.h), in its memory; every product is
// Backend::rows_matmul_forward, so a sequence's rows do not depend on the others.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "core/arena.h"
#include "model/cca.h"
#include "model/config.h"

namespace zaya {

// The constant-size states of a decoder's sequences at one CCA stage, one row per slot, in the
// backend's memory.
struct CcaDecodeState {
  float* window = nullptr;  // [slots, 2, C]: q0 ‖ k0 of positions t-2 and t-1 (zeros before 0)
  float* v_prev = nullptr;  // [slots, n_k·d / 2]: val_proj2 of position t-1 (zeros before 0)
};

// Floats of one slot's window and v_prev rows.
int64_t cca_window_floats(const ModelConfig& c);
int64_t cca_v_prev_floats(const ModelConfig& c);

// Bytes of keys and values per position and stage (the part that grows with the context).
inline int64_t cca_kv_bytes_per_token(const ModelConfig& c) {
  return 2 * c.kv_dim() * 4;
}

// Slot `slot`'s state after position seq-1 of a forward of one sequence of `seq` tokens (from the
// activations cca_forward kept, in the backend's memory).
void cca_state_from_forward(const Backend& be, const CcaDecodeState& st, int slot,
                            const CcaActivations& act, const ModelConfig& c, int seq);

// The decode rows of one step (backend memory): row r is slot slots[r]'s new token, with the
// RoPE rows of its position and where its key and value go (kv_rows[2r], kv_rows[2r+1]: rows of
// kv_dim floats from `kv`; -1: another rank keeps them).
struct CcaDecodeRows {
  int n = 0;
  const int32_t* slots = nullptr;
  const float* rope_cos = nullptr;  // [n, rot/2]
  const float* rope_sin = nullptr;
  float* kv = nullptr;
  const int64_t* kv_rows = nullptr;
};

// For rows r < n: q[r] ([n_q·d], normalised, RoPE applied) of the token whose normalised stage
// input is x[r] ([E]); its key and value are written to the cache; the states advance.
void cca_decode_project(const Backend& be, float* q, const CcaDecodeRows& rows,
                        const CcaDecodeState& st, const float* x, const CcaWeights& w,
                        const ModelConfig& c, Arena& arena);

// out[n, E] = o_proj(att[n, n_q·d]).
void cca_decode_output(const Backend& be, float* out, const float* att, int n, const CcaWeights& w,
                       const ModelConfig& c);

}  // namespace zaya
