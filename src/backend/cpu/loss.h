// Cross-entropy over the vocabulary.
#pragma once

#include "backend/cpu/cpu_path_target.h"

#include <cstdint>

#include "backend/op_types.h"  // kIgnoreIndex

namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

// Returns Σ over rows with target ≠ kIgnoreIndex of −log softmax(logits)[target], and sets
// *count to the number of such rows. Also stores each row's logsumexp in lse[n].
double cross_entropy_forward(float* lse, const float* logits, const int32_t* targets, int n,
                             int vocab, int64_t* count);

// Overwrites logits[n, vocab] with d(loss_scale · Σ losses)/dlogits = scale · (softmax − onehot);
// ignored rows become zero. In place, because the vocabulary-wide buffer is the largest of a step.
void cross_entropy_backward_inplace(float* logits, const float* lse, const int32_t* targets, int n,
                                    int vocab, float loss_scale);

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
