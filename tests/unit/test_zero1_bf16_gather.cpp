// ZeRO-1's all-gather in bf16 (Zero1Sync::WeightCodec) on one process: the pieces go through
// packing, the communicator and storing as at any world size. A layout where every fifth value
// is "fp32" and one stretch is fp32 throughout: the stored values must be each value rounded to
// bf16 (core/tensor.h) where bf16, and exactly the value where fp32; the buckets whose fp32 share
// would make the bf16 form no smaller go as fp32, and the bytes sent reflect both.
#include <gtest/gtest.h>

#include <vector>

#include "core/tensor.h"
#include "dist/local_communicator.h"
#include "optim/zero1_sync.h"
#include "world_only_communicator.h"

namespace zaya {
namespace {

TEST(Zero1Bf16Gather, StoresTheRoundedValuesAndTheFp32OnesExactly) {
  const int64_t total = 1000;
  auto is_fp32 = [](int64_t i) { return i % 5 == 0 || (i >= 300 && i < 500); };
  std::vector<float> master(total);
  for (int64_t i = 0; i < total; ++i) master[size_t(i)] = 1.0f + float(i) / 3000.0f;
  std::vector<float> stored(total, -1.0f);
  int64_t fallback_values = 0;
  Zero1Sync::WeightCodec codec;
  codec.fp32_count = [&](int64_t offset, int64_t n) {
    int64_t c = 0;
    for (int64_t i = offset; i < offset + n; ++i) c += is_fp32(i);
    return c;
  };
  codec.pack = [&](int64_t offset, int64_t n, const float* values, uint16_t* bf16, float* fp32) {
    for (int64_t i = 0; i < n; ++i)
      if (is_fp32(offset + i))
        *fp32++ = values[i];
      else
        bf16[i] = f32_to_bf16(values[i]);
  };
  codec.store = [&](int64_t offset, int64_t n, const uint16_t* bf16, const float* fp32) {
    for (int64_t i = 0; i < n; ++i)
      stored[size_t(offset + i)] = is_fp32(offset + i) ? *fp32++ : bf16_to_f32(bf16[i]);
  };
  codec.store_fp32 = [&](int64_t offset, const float* values, int64_t n) {
    for (int64_t i = 0; i < n; ++i) stored[size_t(offset + i)] = values[i];
    fallback_values += n;
  };
  dist::LocalCommunicator comm;
  Zero1Sync sync(comm, total, /*staging_floats=*/100);  // buckets of 100
  sync.all_gather_weights(master.data(), codec);
  size_t rounded = 0;
  for (int64_t i = 0; i < total; ++i) {
    const float want = is_fp32(i) ? master[size_t(i)] : bf16_to_f32(f32_to_bf16(master[size_t(i)]));
    ASSERT_EQ(stored[size_t(i)], want) << i;
    rounded += want != master[size_t(i)];
  }
  EXPECT_GT(rounded, 500u) << "the bf16 values travel rounded";
  // [300, 500) is all fp32 (100 of 100 values per bucket): those two buckets go as fp32; the
  // others carry 20 fp32 values per 100 (bf16 100 halves + 40 < 200).
  EXPECT_EQ(fallback_values, 200);
  EXPECT_EQ(sync.bytes_per_step(codec), 0) << "one rank sends nothing";
  // At 2 ranks (a communicator that only states the world: nothing moves) buckets are 50 values.
  // Rank 0's buckets at 300, 350, 400 and 450 are fp32 throughout: those 4 go as fp32, 200 bytes
  // each; the other 6 carry at most 10 fp32 values, 50 + 2·10 halves = 140 bytes. Each rank sends
  // its pieces to the other (1,640 bytes) and half of the 1,000-float reduce-scatter (2,000).
  test::WorldOnly two(0, 2);
  Zero1Sync at_two(two, total, 100);
  EXPECT_EQ(at_two.bytes_per_step(codec), 2000 + 4 * 200 + 6 * 140);
  EXPECT_EQ(at_two.bytes_per_step(), 2 * 2000) << "in fp32: the all-gather as the reduce";
}

}  // namespace
}  // namespace zaya
