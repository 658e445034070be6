// Helpers of the GPU op tests: random inputs, the comparison they are held to (gpu_compare.h), and
// the device buffers they fill.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "backend/cuda/device.h"
#include "gpu_compare.h"

namespace zaya::test {

// The GPU tests open this namespace (`using namespace test;`) for these and DeviceBuffer.
using cuda::DeviceBuffer;

using Floats = std::vector<float>;

// An fp32 op against its cpu:: namesake. The two differ by the order of their sums (cuBLAS's and
// the kernels' reductions against OpenBLAS's and the CPU loops), by FMA contraction and by CUDA's
// expf / logf / rsqrtf (a few ulp): about 1e-7 of an element's size, up to ~1e-6 for the sums of
// a few thousand terms the tests run (2^-24 ≈ 6e-8 per rounding). rtol 1e-5 leaves a margin of 10
// over that; the floor, 1e-5 of the reference's RMS, covers elements that cancelling terms made
// small (the backward ops also add onto buffers of O(1) values).
constexpr Tolerance kTolerance{1e-5, 1e-5};

inline Floats random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Floats v(n);
  for (float& x : v) x = u(g);
  return v;
}

}  // namespace zaya::test
