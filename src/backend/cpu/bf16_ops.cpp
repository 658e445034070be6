#include "backend/cpu/bf16_ops.h"

#include "core/tensor.h"

namespace zaya::cpu {

void round_to_bf16(uint16_t* dst, const float* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

void widen_bf16(float* dst, const uint16_t* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

}  // namespace zaya::cpu
