// exp for the hot softmax loops (attention, cross-entropy): branch-free so the compiler vectorises
// it, unlike a libm call per element. Cody-Waite reduction x = n·ln2 + r (|r| ≤ ln2/2), a degree-6
// polynomial for e^r and 2^n assembled in the exponent bits. Relative error ≤ 2.4e-7 (4 ulp) on
// [−87, 88] (checked exhaustively over the floats in tests); below −87 (and for −inf, the causal
// mask) the result is exactly 0, so masked attention terms contribute nothing at all.
#pragma once

#include <cstdint>
#include <cstring>

namespace zaya::cpu {

// The constants, shared with the vector form of the decode's attention (decode_ops.cpp), which
// computes the same operations lane by lane.
inline constexpr float kExpLog2e = 1.44269504088896341f;
inline constexpr float kExpLn2High = 0.693145751953125f, kExpLn2Low = 1.42860682030941723212e-6f;
// e^r = 1 + r + r²/2 + ...: Horner's steps p = p·r + c from p = 1/720.
inline constexpr float kExpFirst = 1.0f / 720.0f;
inline constexpr float kExpSteps[6] = {1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f, 0.5f, 1.0f, 1.0f};

inline float fast_exp(float x_in) {
  const float x = x_in < -87.0f ? -87.0f : (x_in > 88.0f ? 88.0f : x_in);
  // Rounded half to even: rint does that in the default rounding mode (zaya never changes it), and
  // GCC 12 vectorises rint but not __builtin_roundevenf (every loop calling this stayed scalar).
  const float n = __builtin_rintf(x * kExpLog2e);
  const float r = (x - n * kExpLn2High) - n * kExpLn2Low;
  float p = kExpFirst;
  for (const float c : kExpSteps) p = p * r + c;
  const int32_t bits = (int32_t(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return x_in < -87.0f ? 0.0f : p * scale;
}

}  // namespace zaya::cpu
