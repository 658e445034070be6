// bf16 ⇄ fp32 on the device, bit for bit core/tensor.h's host conversions (rounding to nearest,
// ties to even; NaN stays NaN): the NCCL communicator's bf16 sums and the bf16 weight storage use
// them, so host and device agree on every stored value.
#pragma once

#include <cstdint>

#include "backend/cuda/vendor.h"

namespace zaya::cuda {

__device__ inline float bf16_to_f32(uint16_t v) {
  return __uint_as_float(uint32_t(v) << 16);
}
__device__ inline uint16_t f32_to_bf16(float f) {
  const uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

}  // namespace zaya::cuda
