// The CPU ops that read typed weights (backend/weight_ref.h): the products and the embedding's
// gather as the Backend takes them. fp32 weights go to the plain ops (matmul.h, lm_head_loss.h,
// model_ops.h) as they are. bf16 weights are widened into fp32 scratch first, and a bf16 weight
// gradient is computed into fp32 scratch and added into the bf16 values with one rounding per
// element: the bookkeeping of the bf16 GPU backend, on the CPU, so that cpu-as-device checks it
// bitwise (its numbers stay the CPU's: the activations are not rounded).
#pragma once

#include "backend/cpu/cpu_path_target.h"

#include <cstdint>

#include "backend/op_types.h"
#include "backend/weight_ref.h"

namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

void matmul_forward(float* out, const float* in, WeightRef w, const float* bias, int n, int k,
                    int m);
void matmul_backward(float* din, GradRef dw, float* dbias, const float* dout, const float* in,
                     WeightRef w, int n, int k, int m);
void grouped_matmul_forward(float* out, const float* in, const WeightRef* weights,
                            const int* offsets, int groups, int k, int m);
void grouped_matmul_backward(float* din, const GradRef* dweights, const float* dout,
                             const float* in, const WeightRef* weights, const int* offsets,
                             int groups, int k, int m);
double lm_head_loss_forward(float* lse, const float* y, WeightRef w, const int32_t* targets, int n,
                            int e, int v, const LmHeadChunks& chunks, float* scratch,
                            int64_t* count);
void lm_head_loss_backward(float* dy, GradRef dw, const float* y, WeightRef w, const float* lse,
                           const int32_t* targets, int n, int e, int v, float loss_scale,
                           const LmHeadChunks& chunks, float* scratch);
void embedding_forward(float* out, WeightRef table, const int32_t* tokens, int n, int e);

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
