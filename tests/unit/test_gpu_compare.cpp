// The GPU tests' element-wise comparison (tests/gpu/gpu_compare.h), checked here on the CPU since
// the GPU tests themselves need a device: it must reject an error in a small element that the
// former whole-tensor measure (max|diff| / max|want|) let through, name the worst element, and
// accept rounding-sized differences.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "../gpu/gpu_compare.h"

namespace zaya {
namespace {

using test::elementwise_close;
using test::Tolerance;

// One element of 1000 and others of about 1: the former measure allowed 1e-5 · 1000 = 1e-2 of
// error on each of them.
std::vector<float> mixed_scales() {
  std::vector<float> v(100);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(std::sin(double(i) + 0.5));
  v[7] = 1000.0f;
  return v;
}

TEST(GpuCompare, AnErrorTheWholeTensorMeasureMissedFails) {
  const std::vector<float> want = mixed_scales();
  std::vector<float> got = want;
  got[42] = -got[42];          // |want[42]| ≈ 0.95 (sin 42.5): the error is 1.9 of it
  double diff = 0, scale = 0;  // what the former relative_error measured
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::fabs(double(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(double(want[i])));
  }
  ASSERT_GT(diff / scale, 1e-5);  // even the old measure sees this one...
  got = want;
  got[42] *= 1.005f;  // ...but not a 0.5 % error in it (5e-3 < 1e-5 · 1000)
  diff = std::fabs(double(got[42]) - want[42]);
  EXPECT_LE(diff / scale, 1e-5);
  const ::testing::AssertionResult r = elementwise_close(got, want, Tolerance{1e-5, 1e-5});
  ASSERT_FALSE(r);
  const std::string msg = r.message();
  EXPECT_NE(msg.find("1 of 100 elements"), std::string::npos) << msg;
  EXPECT_NE(msg.find("worst at [42]"), std::string::npos) << msg;
}

TEST(GpuCompare, ElementsNearZeroAreHeldToTheFloor) {
  std::vector<float> want(64, 1.0f), got;
  want[3] = 0.0f;  // cancelled to zero: held to floor · rms, rms ≈ 0.99
  got = want;
  got[3] = 5e-6f;
  EXPECT_TRUE(elementwise_close(got, want, Tolerance{1e-5, 1e-5}));
  got[3] = 2e-5f;
  EXPECT_FALSE(elementwise_close(got, want, Tolerance{1e-5, 1e-5}));
}

TEST(GpuCompare, AcceptsRoundingAndRejectsNanAndSizes) {
  const std::vector<float> want = mixed_scales();
  std::vector<float> got = want;
  for (float& x : got) x = std::nextafter(x, 2.0f * x);  // one ulp: ~6e-8 of each element
  EXPECT_TRUE(elementwise_close(got, want, Tolerance{1e-5, 1e-5}));
  EXPECT_FALSE(elementwise_close(got, want, Tolerance{}));  // exact asks for the same bits
  EXPECT_TRUE(elementwise_close(want, want, Tolerance{}));
  got = want;
  got[5] = std::nanf("");
  EXPECT_FALSE(elementwise_close(got, want, Tolerance{1e-5, 1e-5}));
  got.pop_back();
  EXPECT_FALSE(elementwise_close(got, want, Tolerance{1e-5, 1e-5}));
}

}  // namespace
}  // namespace zaya
