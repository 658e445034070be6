// The emulated CUDA device's own checks (backend/cuda_emu/kernel_launch.h): each broken kernel
// below is refused with the kernel's name and the check it failed, and its correct twin runs and
// gives the right numbers. Kernels are written as in backend/cuda (vendor.h's spellings).
#include <gtest/gtest.h>

#include <omp.h>

#include <string>
#include <vector>

#include "backend/cuda/device.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/vendor.h"
#include "core/error.h"

namespace zaya::cuda {
namespace {

constexpr int kThreads = 128;

// The block's sum in shared memory by a tree; `synced` false leaves out the barriers, so a
// thread may read a slot before its writer has written it.
__global__ void tree_sum_kernel(float* out, const float* in, bool synced) {
  __shared__ float slots[kThreads];
  slots[threadIdx.x] = in[blockIdx.x * blockDim.x + threadIdx.x];
  if (synced) __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (int(threadIdx.x) < s) slots[threadIdx.x] += slots[threadIdx.x + s];
    if (synced) __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = slots[0];
}

// A barrier only half of the block reaches (the other half waits at another one).
__global__ void divergent_barrier_kernel(float* out) {
  if (threadIdx.x < kThreads / 2) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1.0f;
}

// The warp's sum by butterfly shuffles; `divergent` lets only the even lanes shuffle.
__global__ void warp_sum_kernel(float* out, const float* in, bool divergent) {
  float v = in[threadIdx.x];
  if (!divergent || threadIdx.x % 2 == 0)
    for (int o = ZAYA_WARP_SIZE / 2; o > 0; o /= 2) v += ZAYA_SHFL_XOR(v, o);
  out[threadIdx.x] = v;
}

__global__ void copy_kernel(float* out, const float* in, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[i];
}

__global__ void dynamic_shared_kernel(float* out) {
  ZAYA_DYNAMIC_SHARED(float, scratch);
  scratch[threadIdx.x] = float(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = scratch[blockDim.x - 1 - threadIdx.x];
}

// The message of the zaya::Error `f` throws ("" when it does not).
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::vector<float> ramp(int n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = float(i % 7) - 3.0f;
  return v;
}

TEST(CudaEmulator, BlockSumWithBarriersIsRight) {
  const int blocks = 3;
  DeviceBuffer<float> in(ramp(blocks * kThreads)), out(static_cast<size_t>(blocks));
  ZAYA_LAUNCH(tree_sum_kernel, blocks, kThreads, 0, 0)(out.get(), in.get(), true);
  const std::vector<float> host = ramp(blocks * kThreads), got = out.download();
  for (int b = 0; b < blocks; ++b) {
    float want = 0;
    for (int t = 0; t < kThreads; ++t) want += host[size_t(b * kThreads + t)];
    EXPECT_EQ(got[size_t(b)], want) << "block " << b;
  }
}

TEST(CudaEmulator, RemovedBarrierIsARace) {
  // Static shared memory keeps its bytes from launch to launch (one copy per OS thread, as the
  // emulator cannot reach a function's statics), so the data differs from the test above: a
  // racy read of an older launch's slot would otherwise find the value it would have computed.
  std::vector<float> values = ramp(kThreads);
  for (float& v : values) v = v * 2.0f + 1.0f;
  DeviceBuffer<float> in(values), out(1);
  const std::string e = error_of([&] {
    ZAYA_LAUNCH(tree_sum_kernel, 1, kThreads, 0, 0)(out.get(), in.get(), false);
  });
  EXPECT_NE(e.find("tree_sum_kernel"), std::string::npos) << e;
  EXPECT_NE(e.find("depends on the order its threads run in"), std::string::npos) << e;
}

TEST(CudaEmulator, BarrierInADivergentBranchIsRefused) {
  DeviceBuffer<float> out(static_cast<size_t>(kThreads));
  const std::string e = error_of([&] {
    ZAYA_LAUNCH(divergent_barrier_kernel, 1, kThreads, 0, 0)
    (out.get());
  });
  EXPECT_NE(e.find("divergent_barrier_kernel"), std::string::npos) << e;
  EXPECT_NE(e.find("wait at different barriers"), std::string::npos) << e;
}

TEST(CudaEmulator, WarpShuffleSumsTheWarp) {
  const int n = 2 * ZAYA_WARP_SIZE;
  DeviceBuffer<float> in(ramp(n)), out(static_cast<size_t>(n));
  ZAYA_LAUNCH(warp_sum_kernel, 1, n, 0, 0)(out.get(), in.get(), false);
  const std::vector<float> host = ramp(n), got = out.download();
  for (int w = 0; w < 2; ++w) {
    float want = 0;  // the butterfly's sum is exact here: small integers
    for (int l = 0; l < ZAYA_WARP_SIZE; ++l) want += host[size_t(w * ZAYA_WARP_SIZE + l)];
    for (int l = 0; l < ZAYA_WARP_SIZE; ++l)
      EXPECT_EQ(got[size_t(w * ZAYA_WARP_SIZE + l)], want) << "warp " << w << " lane " << l;
  }
}

TEST(CudaEmulator, ShuffleInADivergentBranchIsRefused) {
  DeviceBuffer<float> in(ramp(ZAYA_WARP_SIZE)), out(static_cast<size_t>(ZAYA_WARP_SIZE));
  const std::string e = error_of([&] {
    ZAYA_LAUNCH(warp_sum_kernel, 1, ZAYA_WARP_SIZE, 0, 0)(out.get(), in.get(), true);
  });
  EXPECT_NE(e.find("warp_sum_kernel"), std::string::npos) << e;
  EXPECT_NE(e.find("does not take part in the shuffle"), std::string::npos) << e;
}

TEST(CudaEmulator, HostAndFreedPointersAreRefused) {
  std::vector<float> host(16);
  DeviceBuffer<float> out(16);
  std::string e = error_of([&] {
    ZAYA_LAUNCH(copy_kernel, 1, 16, 0, 0)
    (out.get(), host.data(), 16);
  });
  EXPECT_NE(e.find("copy_kernel"), std::string::npos) << e;
  EXPECT_NE(e.find("argument 1 points outside every device allocation"), std::string::npos) << e;
  float* freed = nullptr;
  {
    DeviceBuffer<float> gone(16);
    freed = gone.get();
  }
  e = error_of([&] { ZAYA_LAUNCH(copy_kernel, 1, 16, 0, 0)(freed, out.get(), 16); });
  EXPECT_NE(e.find("argument 0 points outside every device allocation"), std::string::npos) << e;
}

TEST(CudaEmulator, LaunchLimitsAreTheHardwares) {
  DeviceBuffer<float> a(8), b(8);
  std::string e = error_of([&] { ZAYA_LAUNCH(copy_kernel, 1, 1025, 0, 0)(a.get(), b.get(), 8); });
  EXPECT_NE(e.find("1025 threads in a block"), std::string::npos) << e;
  e = error_of([&] { ZAYA_LAUNCH(copy_kernel, dim3(1, 65536), 32, 0, 0)(a.get(), b.get(), 8); });
  EXPECT_NE(e.find("grid y or z over 65,535"), std::string::npos) << e;
  const size_t big = 64 * 1024;
  DeviceBuffer<float> out(256);
  e = error_of([&] { ZAYA_LAUNCH(dynamic_shared_kernel, 1, 256, big, 0)(out.get()); });
  EXPECT_NE(e.find("must opt in with cudaFuncSetAttribute"), std::string::npos) << e;
  ASSERT_EQ(cudaFuncSetAttribute(dynamic_shared_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 int(big)),
            cudaSuccess);
  ZAYA_LAUNCH(dynamic_shared_kernel, 1, 256, big, 0)(out.get());
  const std::vector<float> got = out.download();
  for (int t = 0; t < 256; ++t) EXPECT_EQ(got[size_t(t)], float(255 - t));
}

TEST(CudaEmulator, CopiesOutsideAllocationsAreRefused) {
  DeviceBuffer<float> a(8);
  std::vector<float> host(9);
  const std::string e = error_of([&] {
    ZAYA_CUDA_CHECK(cudaMemcpy(a.get(), host.data(), sizeof(float) * 9, cudaMemcpyHostToDevice));
  });
  EXPECT_NE(e.find("not inside a device allocation"), std::string::npos) << e;
}

// The emulated cuBLASLt's products do not depend on the host's OpenMP thread count, as a GPU's
// do not on the host's: the trainer changes the count while other work holds the CPU, and a bf16
// run resumed under load once ended with other weights than the uninterrupted run (OpenBLAS
// splits a product between its threads at shape-dependent boundaries). Shapes large enough for
// OpenBLAS to split, with ragged edges; under the second test pass's Haswell kernels too.
TEST(CudaEmulator, ProductsDoNotDependOnTheHostThreadCount) {
  const int m = 333, n = 211, k = 197;
  std::vector<float> a(size_t(m) * k), b(size_t(k) * n);
  uint32_t state = 12345;
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return float(int(state >> 9) - (1 << 22)) / float(1 << 22);
  };
  for (float& x : a) x = next();
  for (float& x : b) x = next();
  const DeviceBuffer<float> da(a), db(b);
  const int saved = omp_get_max_threads();
  std::vector<std::vector<float>> results;
  for (const int threads : {1, 2, 3, 4}) {
    omp_set_num_threads(threads);
    DeviceBuffer<float> dc(size_t(m) * n);
    gemm_f32_batched(false, false, m, n, k, 1.0f, da.get(), m, db.get(), k, 0.0f, dc.get(), m,
                     GemmBatch{});
    results.push_back(dc.download());
  }
  omp_set_num_threads(saved);
  for (size_t i = 1; i < results.size(); ++i)
    EXPECT_EQ(results[i], results[0]) << "at " << i + 1 << " threads against 1";
}

}  // namespace
}  // namespace zaya::cuda
