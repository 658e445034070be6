// bf16 storage on the CPU: the conversions the model's bf16 weight storage runs as backend ops
// (ParameterPlacement::set_bf16_weight_storage). The rounding is core/tensor.h's: to nearest, ties
// to even, the rounding of CUDA's __float2bfloat16_rn and of PyTorch's .to(torch.bfloat16).
#pragma once

#include "backend/cpu/cpu_path_target.h"

#include <cstddef>
#include <cstdint>

namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

// dst[i] = src[i] rounded to bf16.
void round_to_bf16(uint16_t* dst, const float* src, size_t n);
// dst[i] = the fp32 value of bf16 src[i] (exact: bf16 is fp32's upper half).
void widen_bf16(float* dst, const uint16_t* src, size_t n);

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
