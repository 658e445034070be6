// CCA for decoding: one token at a time against a per-sequence cache, the same math as
// cca_forward (cca.cpp) with nothing recomputed for past tokens.
//
// What a CCA stage must remember of a sequence (and nothing else):
//  - the keys and values of every past token, in the compressed latent space: n_k·d floats each
//    (the 8× saving over a standard cache: ZAYA1-base keeps 2·256 floats per token and stage where
//    multi-head attention over the hidden size would keep 2·2048);
//  - the convolution window: the last two rows of the packed pre-convolution projection q0 ‖ k0,
//    since the two stacked kernel-2 convolutions give position t a receptive field of t-2..t;
//  - the value shift: the previous token's second value projection (v_prev_raw).
#pragma once

#include <cstdint>
#include <vector>

#include "core/arena.h"
#include "model/cca.h"
#include "model/config.h"

namespace zaya {

struct CcaCache {
  int64_t capacity = 0;       // positions the buffers hold
  int64_t length = 0;         // positions filled (the next token's position)
  std::vector<float> k, v;    // [capacity, n_k·d]: normalised + RoPE keys, shifted values
  std::vector<float> window;  // [2, C]: q0 ‖ k0 of positions length-2 and length-1 (0 before 0)
  std::vector<float> v_prev_raw;  // [n_k·d / 2]: val_proj2 of position length-1

  // Bytes of keys and values per position (the part that grows with the context).
  static int64_t bytes_per_token(const ModelConfig& c) { return 2 * c.kv_dim() * 4; }
};

void cca_cache_init(CcaCache& cache, const ModelConfig& c, int64_t capacity);

// Fills `cache` with sequence b of a forward of `batch` sequences of `seq` tokens (the
// activations cca_forward kept); the next decoded token takes position seq.
void cca_cache_from_forward(CcaCache& cache, const CcaActivations& act, const ModelConfig& c,
                            int batch, int seq, int b);

// out[E] = CCA(x[E]) for the token at position cache.length, whose RoPE rows are rope_cos/sin
// ([rot/2] each); appends it to the cache. Scratch comes from `arena`.
void cca_decode(float* out, CcaCache& cache, const float* x, const CcaWeights& w,
                const float* rope_cos, const float* rope_sin, const ModelConfig& c, Arena& arena);

}  // namespace zaya
