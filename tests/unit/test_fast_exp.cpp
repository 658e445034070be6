// fast_exp against libm's exp in double over [−87, 88] (every 29th float: both signs, all
// exponents), and its exact zero below the range and at −inf (the causal mask).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "backend/cpu/fast_exp.h"

namespace zaya::cpu {
namespace {

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

TEST(FastExp, WithinFourUlpOverTheRange) {
  double worst = 0;
  float worst_x = 0;
  for (uint64_t b = 0; b < 0x100000000ull; b += 29) {
    const float x = from_bits(uint32_t(b));
    if (!(x >= -87.0f && x <= 88.0f)) continue;
    const double e = std::exp(double(x));
    const double rel = std::abs(double(fast_exp(x)) - e) / e;
    if (rel > worst) worst = rel, worst_x = x;
  }
  EXPECT_LT(worst, 2.5e-7) << "at x = " << worst_x;
}

TEST(FastExp, ExactZeroBelowTheRangeAndAtMinusInfinity) {
  EXPECT_EQ(fast_exp(-INFINITY), 0.0f);
  EXPECT_EQ(fast_exp(-88.0f), 0.0f);
  EXPECT_EQ(fast_exp(-1e30f), 0.0f);
  EXPECT_EQ(fast_exp(0.0f), 1.0f);
  EXPECT_GT(fast_exp(88.0f), 1e38f);
}

}  // namespace
}  // namespace zaya::cpu
