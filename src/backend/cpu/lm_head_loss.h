// The tied LM head and the cross-entropy, fused and chunked over tokens and the vocabulary, so
// that no [tokens × vocab] logits buffer exists: ZAYA1's vocabulary is 262,272, and a 32k-token
// micro-batch's fp32 logits would be 34 GB. Only one [chunk.tokens × chunk.vocab] block of
// logits is held at a time.
//
// Forward: per token chunk, the vocabulary chunks in order update a running max and a running
// sum of exponentials (rescaled when the max grows, in fp64), and the target's logit is kept when
// its chunk passes; lse = max + log(sum). Backward recomputes each block of logits (one more LM
// head product) and turns it into dlogits = scale·(softmax − onehot) in place, then
//   dy[tokens, E] += dlogits · W_chunk      dW_chunk[vocab, E] += dlogitsᵀ · y
// Every sum runs in a fixed order (token chunks in order for dW), so results do not depend on the
// thread count.
#pragma once

#include "backend/cpu/cpu_path_target.h"

#include <cstddef>
#include <cstdint>

#include "backend/op_types.h"  // LmHeadChunks, kIgnoreIndex

namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

// lse[n] of the logits y[n, E] · w[V, E]ᵀ; returns Σ over rows with a target (≠ kIgnoreIndex) of
// lse − logit[target], and sets *count to the number of such rows.
double lm_head_loss_forward(float* lse, const float* y, const float* w, const int32_t* targets,
                            int n, int e, int v, const LmHeadChunks& chunks, float* scratch,
                            int64_t* count);

// dy[n, E] += ∂(loss_scale · Σ losses)/∂y and dw[V, E] += ∂/∂w (either may be nullptr).
void lm_head_loss_backward(float* dy, float* dw, const float* y, const float* w, const float* lse,
                           const int32_t* targets, int n, int e, int v, float loss_scale,
                           const LmHeadChunks& chunks, float* scratch);

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
