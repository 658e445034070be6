// fast_exp against libm's exp in double over [−87, 88] (every 29th float: both signs, all
// exponents), and its exact zero below the range and at −inf (the causal mask).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

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

// The softmax loops call fast_exp in loops the compiler vectorises (it rounds with rint, which GCC
// vectorises, for that); the results must be the bits of one call at a time, which a call through a
// volatile function pointer is. The inputs include the round-half cases x·log2(e) = k + 1/2, where
// rint must round to even as roundeven does.
TEST(FastExp, VectorisedLoopGivesTheBitsOfSingleCalls) {
  std::vector<float> x;
  for (int i = -200000; i <= 200000; ++i) x.push_back(float(i) * 4.4e-4f);
  for (int k = -120; k <= 120; ++k) x.push_back((float(k) + 0.5f) / 1.44269504088896341f);
  x.push_back(-INFINITY);
  x.push_back(-90.0f);
  x.push_back(89.0f);
  std::vector<float> vec(x.size());
  for (size_t i = 0; i < x.size(); ++i) vec[i] = fast_exp(x[i]);
  float (*volatile single)(float) = [](float v) { return fast_exp(v); };
  for (size_t i = 0; i < x.size(); ++i) {
    const float s = single(x[i]);
    ASSERT_EQ(std::memcmp(&vec[i], &s, 4), 0) << "at x = " << x[i] << ": " << vec[i] << " vs " << s;
  }
  EXPECT_EQ(__builtin_rintf(2.5f), 2.0f);  // half to even in the rounding mode zaya runs in
  EXPECT_EQ(__builtin_rintf(-3.5f), -4.0f);
}

}  // namespace
}  // namespace zaya::cpu
