// Helpers of the GPU op tests: random inputs, the error measure they are held to, and the
// device buffers they fill.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "backend/cuda/device.h"

namespace zaya::test {

// The GPU tests open this namespace (`using namespace test;`) for these and DeviceBuffer.
using cuda::DeviceBuffer;

using Floats = std::vector<float>;

constexpr double kTolerance = 1e-5;

inline Floats random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Floats v(n);
  for (float& x : v) x = u(g);
  return v;
}

// max |got − want| / max |want|: the error relative to the tensor's scale.
inline double relative_error(const Floats& got, const Floats& want) {
  EXPECT_EQ(got.size(), want.size());
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    diff = std::max(diff, std::fabs(double(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(double(want[i])));
  }
  return diff / scale;
}

}  // namespace zaya::test
