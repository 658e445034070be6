// The NCCL communicator (backend/cuda/nccl_communicator.h) on this process's GPU, one rank: every
// collective moves GPU memory and gives the one-rank results (sums of one contribution are the
// contribution, bitwise), in place and out of place, with rank-order sums and NCCL's own. Several
// ranks need several GPUs: gpu.nccl runs `zaya bench comm --device cuda` under mpirun there.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/cuda/device.h"
#include "backend/cuda/nccl_communicator.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "gpu_test_util.h"

namespace zaya {
namespace {

using namespace test;

TEST(GpuNccl, OneRankCollectivesMoveGpuMemory) {
  auto host = dist::make_communicator();
  ASSERT_EQ(host->world_size(), 1) << "run the GPU tests as one process";
  for (const bool rank_order : {true, false}) {
    std::unique_ptr<dist::Communicator> nccl;
    try {
      nccl = cuda::make_nccl_communicator(*host, rank_order);
    } catch (const Error& e) {
      if (std::string(e.what()).find("cannot load") != std::string::npos)
        GTEST_SKIP() << "NCCL is not on this machine's library path: " << e.what();
      throw;
    }
    EXPECT_TRUE(nccl->device_memory());
    EXPECT_EQ(nccl->kind(), rank_order ? "nccl" : "nccl-native");
    const Floats x = random_floats(1000, 300);
    DeviceBuffer<float> a(x), b(x.size());
    nccl->all_reduce(a.get(), b.get(), x.size(), DType::F32, dist::ReduceOp::Sum);
    EXPECT_EQ(b.download(), x) << "all_reduce";
    nccl->all_reduce(a.get(), a.get(), x.size(), DType::F32, dist::ReduceOp::Max);
    EXPECT_EQ(a.download(), x) << "in-place all_reduce";
    b.zero();
    nccl->reduce_scatter(a.get(), b.get(), x.size(), DType::F32, dist::ReduceOp::Sum);
    EXPECT_EQ(b.download(), x) << "reduce_scatter";
    b.zero();
    nccl->start_reduce_scatter(a.get(), b.get(), x.size(), DType::F32, dist::ReduceOp::Sum)->wait();
    EXPECT_EQ(b.download(), x) << "start_reduce_scatter";
    b.zero();
    nccl->all_gather(a.get(), b.get(), x.size(), DType::F32);
    EXPECT_EQ(b.download(), x) << "all_gather";
    b.zero();
    nccl->broadcast(a.get(), b.get(), x.size(), DType::F32, 0);
    EXPECT_EQ(b.download(), x) << "broadcast";
    const std::vector<int32_t> ints = {1, -2, 3, 2147483647};
    DeviceBuffer<int32_t> i(ints), j(ints.size());
    nccl->all_reduce(i.get(), j.get(), ints.size(), DType::I32, dist::ReduceOp::Sum);
    EXPECT_EQ(j.download(), ints) << "int32 all_reduce";
    nccl->barrier();
  }
}

}  // namespace
}  // namespace zaya
