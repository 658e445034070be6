// Core: tensors and views, bf16 conversion, counter-based RNG, the arena, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "core/arena.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace zaya {
namespace {

TEST(Tensor, ViewsShareStorageAndOutliveTheOriginal) {
  Tensor view;
  {
    Tensor t({4, 3}, DType::F32);
    for (int i = 0; i < 12; ++i) t.data<float>()[i] = float(i);
    view = t.slice(1, 3);
    t.data<float>()[3] = 42.0f;  // row 1, col 0
  }
  ASSERT_EQ(view.shape(), (Shape{2, 3}));
  EXPECT_EQ(view.data<float>()[0], 42.0f);
  EXPECT_EQ(view.data<float>()[5], 8.0f);
  const Tensor r = view.reshape({3, 2});
  EXPECT_EQ(r.data<float>(), view.data<float>());
  EXPECT_THROW(view.reshape({4, 2}), Error);
  EXPECT_THROW(view.slice(1, 4), Error);
  const Tensor c = view.clone();
  view.data<float>()[0] = 0.0f;
  EXPECT_EQ(c.data<float>()[0], 42.0f);
}

TEST(Tensor, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  // 1 + 2^-8 lies exactly between two bf16 values: ties go to the even mantissa (1.0).
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3·2^-8 lies between 1+2^-7 (odd) and 1+2^-6 (even): rounds up to even.
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(-INFINITY)), -INFINITY);
  Tensor t({3}, DType::F32);
  t.data<float>()[0] = 0.5f;
  t.data<float>()[1] = -2.0f;
  t.data<float>()[2] = 3.14159f;
  const Tensor back = t.to_dtype(DType::BF16).to_dtype(DType::F32);
  EXPECT_EQ(back.data<float>()[0], 0.5f);
  EXPECT_EQ(back.data<float>()[1], -2.0f);
  EXPECT_NEAR(back.data<float>()[2], 3.14159f, 0.01f);
}

TEST(Philox, KnownAnswerFromTheRandom123Paper) {
  // Random123's kat_vectors for philox4x32-10: all-zero counter and key.
  const auto z = philox4x32({0, 0, 0, 0}, {0, 0});
  EXPECT_EQ(z[0], 0x6627e8d5u);
  EXPECT_EQ(z[1], 0xe169c58du);
  EXPECT_EQ(z[2], 0xbc57ac4cu);
  EXPECT_EQ(z[3], 0x9b00dbd8u);
  const auto f =
      philox4x32({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu});
  EXPECT_EQ(f[0], 0x408f276du);
  EXPECT_EQ(f[1], 0x41c83b0eu);
  EXPECT_EQ(f[2], 0xa20bc7c6u);
  EXPECT_EQ(f[3], 0x6d5451fdu);
}

TEST(Philox, DrawsArePureFunctionsWithSaneMoments) {
  const Philox a(7, 3), b(7, 3), c(7, 4);
  EXPECT_EQ(a.normal(12345), b.normal(12345));
  EXPECT_NE(a.normal(12345), c.normal(12345));
  double sum = 0, sq = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const double x = a.normal(uint64_t(i));
    sum += x;
    sq += x * x;
    const float u = a.uniform(uint64_t(i));
    ASSERT_GT(u, 0.0f);
    ASSERT_LT(u, 1.0f);
  }
  EXPECT_NEAR(sum / n, 0.0, 0.02);
  EXPECT_NEAR(sq / n, 1.0, 0.02);
}

TEST(Arena, ChainsBlocksThenMergesOnReset) {
  Arena arena;
  float* a = arena.floats(10);
  a[0] = 1.0f;
  float* big = arena.floats(size_t(40) << 20);  // larger than the first 64 MiB block
  big[0] = 2.0f;
  EXPECT_EQ(a[0], 1.0f);  // earlier pointers stay valid
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big) % 64, 0u);
  arena.reset();
  EXPECT_GE(arena.capacity(), arena.high_water());
  const size_t cap = arena.capacity();
  arena.floats(10);
  arena.floats(size_t(40) << 20);
  EXPECT_EQ(arena.capacity(), cap);  // the second step fits in one block
  const float* z = arena.zeros(100);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(z[i], 0.0f);
}

TEST(Error, MessageNamesTheSourceLocation) {
  try {
    ZAYA_CHECK(1 + 1 == 3, "arithmetic is broken: got ", 2);
    FAIL();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("arithmetic is broken: got 2"), std::string::npos);
    EXPECT_NE(m.find("test_core.cpp:"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace zaya
