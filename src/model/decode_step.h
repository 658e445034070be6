// One decode step of the ZAYA1 stack for n rows, each a sequence's new token at its own position:
// the tied embedding, every stage's residual merge, norm and block (CCA against the cache, MoE),
// the final merge and norm, and the tied LM head. Decoding's walk over the stages is written here
// once, on the model's public weights (ZayaModel::decoding_weights, decoding_head). What belongs to
// the decoder (infer/batch_decoder.h) comes in through DecodeCache: the convolution states, where
// the new keys and values go, and the attention of the queries over the cached ones (a shard of
// them under tree attention, infer/kv_attention.h).
//
// Every product is Backend::rows_matmul_forward and a row's attention reads its own sequence
// only, so a row's logits do not depend on the other rows, bit for bit.
#pragma once

#include <cstdint>
#include <vector>

#include "core/arena.h"
#include "model/cca_decode.h"
#include "model/zaya_model.h"

namespace zaya {

// The step's rows, in the backend's memory.
struct DecodeRows {
  int n = 0;
  const int32_t* tokens = nullptr;     // [n]
  const int32_t* positions = nullptr;  // [n]: each row's position, its RoPE row
  const int32_t* slots = nullptr;      // [n]: each row's row of the convolution states
  const int64_t* kv_rows = nullptr;    // [n, 2]: where its key and value go (-1: not here)
  const float* rope_cos = nullptr;     // [positions, rot/2]: RoPE tables the positions index
  const float* rope_sin = nullptr;
};

class DecodeCache {
 public:
  virtual ~DecodeCache() = default;
  // Attention stage a's convolution states (one row per slot) and the buffer kv_rows index.
  virtual CcaDecodeState conv_state(int a) const = 0;
  virtual float* kv_rows_base(int a) const = 0;
  // att[n, n_q·d] of the queries q[n, n_q·d] over the rows' cached keys and values at attention
  // stage a (this step's keys and values included).
  virtual void attend(int a, float* att, const float* q, int n) = 0;
};

// The rows' next-token logits [n, V] (the arena's). `routes`, when given, gets each MoE stage's
// chosen routes [n] (the arena's), in stage order.
float* decode_step(ZayaModel& model, const DecodeRows& rows, DecodeCache& cache, Arena& arena,
                   std::vector<const int32_t*>* routes = nullptr);

}  // namespace zaya
