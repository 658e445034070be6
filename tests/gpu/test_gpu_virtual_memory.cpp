// The CUDA backend's virtual memory (backend/cuda/virtual_memory.cu), which ZeRO-2 keeps its
// gradients in: granules mapped only as they are committed, counted only while mapped, reading
// zero when mapped again, and a model whose gradients are kept on demand computing the gradients
// of whole ones bit for bit (on the emulated device an add into a granule not committed faults).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "../unit/on_demand_gradients.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device.h"

namespace zaya {
namespace {

TEST(GpuVirtualMemory, GranulesAreMappedAsCommittedAndCountedOnlyThen) {
  const Backend& be = cuda_backend();
  const size_t g = be.memory_granule();
  ASSERT_GT(g, 0u) << "this device has no virtual memory management";
  const size_t base = cuda::allocated_bytes(), floats = (5 * g + 124) / sizeof(float);
  {
    BackendBuffer buf = BackendBuffer::reserved(be, floats * sizeof(float));
    float* p = buf.floats();
    EXPECT_EQ(cuda::allocated_bytes(), base) << "nothing is mapped before a commit";
    const size_t three = 3 * g / sizeof(float), half = g / 2 / sizeof(float);
    be.commit(p, 3 * g);
    EXPECT_EQ(cuda::allocated_bytes() - base, 3 * g);
    std::vector<float> host(three);
    be.to_host(host.data(), p, sizeof(float) * three);
    EXPECT_TRUE(std::all_of(host.begin(), host.end(), [](float v) { return v == 0.0f; }))
        << "committed memory reads as zero";
    std::vector<float> pattern(three);
    for (size_t i = 0; i < three; ++i) pattern[i] = float(i % 1000) + 0.5f;
    be.to_device(p, pattern.data(), sizeof(float) * three);
    // Given back from the middle of granule 0 to the end of granule 2: granules 1 and 2 go.
    be.decommit(p + half, sizeof(float) * (three - half));
    EXPECT_EQ(cuda::allocated_bytes() - base, g);
    be.commit(p, 3 * g);
    EXPECT_EQ(cuda::allocated_bytes() - base, 3 * g);
    be.to_host(host.data(), p, sizeof(float) * three);
    EXPECT_TRUE(std::equal(host.begin(), host.begin() + long(half), pattern.begin()))
        << "what was not given back is kept";
    EXPECT_TRUE(std::all_of(host.begin() + long(half), host.end(), [](float v) { return v == 0; }))
        << "what was given back reads as zero";
  }
  EXPECT_EQ(cuda::allocated_bytes(), base) << "released with its mapped granules";
}

// Two micro-batches with the gradients on demand and with whole ones (on_demand_gradients.h):
// the same bits, and zero_grads gives the granules back.
TEST(GpuVirtualMemory, ModelOnDemandGradientsAreTheWholeOnes) {
  const Backend& be = cuda_backend();
  const test::OnDemandGradients r =
      test::run_on_demand_gradients(be, [] { return cuda::allocated_bytes(); });
  EXPECT_EQ(r.on_demand, r.whole);
  const size_t g = be.memory_granule();
  EXPECT_GE(r.bytes(), 2 * g);
  EXPECT_GE(r.given_back, r.bytes() - 2 * g) << "of " << r.bytes() << " gradient bytes";
}

}  // namespace
}  // namespace zaya
