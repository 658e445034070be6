// ZeRO-1's buffers must not grow with the world size: at 2 ranks and at 1,024 the staging and
// piece buffers of each bucket in flight hold at most the staging size (plus one bucket), so a
// 1,024-rank job does not pay 1,024 times a fixed per-rank slice. A communicator that only states
// its rank and world stands in for the ranks (the constructor talks to nobody).
#include <gtest/gtest.h>

#include "core/error.h"
#include "optim/zero1_sync.h"
#include "world_only_communicator.h"

namespace zaya {
namespace {

using test::WorldOnly;

TEST(Zero1Buffers, DoNotGrowWithTheWorldSize) {
  const int64_t total = 8'840'488'784 / 64;  // a large model's parameter count, scaled down
  const int64_t staging = Zero1Sync::kDefaultStagingFloats;
  for (const int world : {2, 3, 64, 1024, 4096}) {
    WorldOnly comm(world / 2, world);
    const Zero1Sync sync(comm, total);
    const int64_t bucket = Zero1Sync::bucket_for(staging, world, sync.layout().chunk());
    // One slot per bucket in flight (the reduce-scatter overlapping the backward keeps two).
    EXPECT_EQ(sync.buffer_floats(), Zero1Sync::kInFlight * bucket * (world + 1))
        << "world " << world;
    EXPECT_LE(sync.buffer_floats(), Zero1Sync::kInFlight * (staging + bucket)) << "world " << world;
  }
  // More ranks than staging floats: one float per rank, still no slice per rank beyond it.
  EXPECT_EQ(Zero1Sync::bucket_for(16, 1024, 1000), 1);
  EXPECT_EQ(Zero1Sync::bucket_for(1 << 21, 2, 100), 100);  // a bucket never exceeds the chunk
}

}  // namespace
}  // namespace zaya
