// Memory taken and given back in granules (Backend::reserve / commit / decommit), which ZeRO-2
// keeps its gradients in: cpu-as-device counts only committed granules and faults on a touch of
// one given back (as a GPU's unmapped virtual memory would); the CPU backend's given-back pages
// read as zero and hold no physical memory; and a model whose gradients are kept on demand
// computes bitwise the gradients of whole ones, committing everything it adds into.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_as_device_backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/device_select.h"
#include "on_demand_gradients.h"

namespace zaya {
namespace {

constexpr size_t kGranule = CpuAsDeviceBackend::kGranule;

bool all_zero(const std::byte* p, size_t bytes) {
  return std::all_of(p, p + bytes, [](std::byte b) { return b == std::byte{0}; });
}

// The whole granules inside [p, p + bytes), as cpu-as-device aligns them.
size_t whole_granules(const void* p, size_t bytes) {
  const auto lo = reinterpret_cast<uintptr_t>(p);
  const uintptr_t begin = (lo + kGranule - 1) / kGranule * kGranule;
  const uintptr_t end = (lo + bytes) / kGranule * kGranule;
  return end > begin ? (end - begin) / kGranule : 0;
}

TEST(MemoryGranules, CpuAsDeviceCountsOnlyCommittedGranules) {
  const Backend& be = cpu_as_device_backend();
  ASSERT_EQ(be.memory_granule(), kGranule);
  const size_t base = cpu_as_device_memory().used, bytes = 5 * kGranule + 12345;
  {
    BackendBuffer buf = BackendBuffer::reserved(be, bytes);
    auto* p = static_cast<std::byte*>(buf.get());
    const size_t whole = whole_granules(p, bytes);
    ASSERT_GE(whole, 4u);
    EXPECT_EQ(cpu_as_device_memory().used - base, bytes - whole * kGranule);
    // Commit every granule, write, then give back the middle of it.
    be.commit(p, bytes);
    EXPECT_EQ(cpu_as_device_memory().used - base, bytes);
    EXPECT_TRUE(all_zero(p, bytes));
    std::memset(p, 0x5A, bytes);
    const size_t lo = kGranule / 2, hi = bytes - kGranule / 2;  // not granule boundaries
    be.decommit(p + lo, hi - lo);
    const size_t given = whole_granules(p + lo, hi - lo);
    ASSERT_GE(given, 3u);
    EXPECT_EQ(cpu_as_device_memory().used - base, bytes - given * kGranule);
    be.commit(p + lo, hi - lo);  // reads as zero again, the rest as written
    EXPECT_EQ(cpu_as_device_memory().used - base, bytes);
    EXPECT_TRUE(all_zero(p + lo, hi - lo));
    EXPECT_TRUE(std::all_of(p, p + lo, [](std::byte b) { return b == std::byte{0x5A}; }));
    EXPECT_TRUE(std::all_of(p + hi, p + bytes, [](std::byte b) { return b == std::byte{0x5A}; }));
    be.decommit(p, bytes);  // released while given back: counted off once
  }
  EXPECT_EQ(cpu_as_device_memory().used, base);
}

TEST(MemoryGranulesDeathTest, CpuAsDeviceFaultsOnAGranuleGivenBack) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const Backend& be = cpu_as_device_backend();
  BackendBuffer buf = BackendBuffer::reserved(be, 3 * kGranule);
  auto* p = static_cast<std::byte*>(buf.get());
  const uintptr_t first = (reinterpret_cast<uintptr_t>(p) + kGranule - 1) / kGranule * kGranule;
  auto* granule = reinterpret_cast<volatile std::byte*>(first);
  EXPECT_DEATH(granule[100] = std::byte{1}, "");
  be.commit(p, 3 * kGranule);
  granule[100] = std::byte{1};  // committed: fine
  EXPECT_EQ(std::byte(granule[100]), std::byte{1});
}

TEST(MemoryGranules, CpuPagesGivenBackReadZeroAndHoldNoMemory) {
  const Backend& be = cpu_backend();
  const size_t page = be.memory_granule(), bytes = 64 * page;
  ASSERT_GE(page, 4096u);
  BackendBuffer buf(be, bytes);
  auto* p = static_cast<std::byte*>(buf.get());
  std::memset(p, 0x33, bytes);
  const size_t lo = 3 * page + 100, hi = 60 * page + 7;
  be.decommit(p + lo, hi - lo);
  EXPECT_TRUE(all_zero(p + lo, hi - lo));
  EXPECT_TRUE(std::all_of(p, p + lo, [](std::byte b) { return b == std::byte{0x33}; }));
  EXPECT_TRUE(std::all_of(p + hi, p + bytes, [](std::byte b) { return b == std::byte{0x33}; }));
  // Given back again (the reads above mapped the zero page), the whole pages are not resident.
  const uintptr_t first = (reinterpret_cast<uintptr_t>(p) + lo + page - 1) / page * page;
  const size_t pages = 50;
  std::vector<unsigned char> resident(pages);
  be.decommit(reinterpret_cast<void*>(first), pages * page);
  ASSERT_EQ(0, mincore(reinterpret_cast<void*>(first), pages * page, resident.data()));
  EXPECT_EQ(std::count_if(resident.begin(), resident.end(), [](unsigned char r) { return r & 1; }),
            0);
}

// Resident parameters on a device: the host's gradients go unused, and their pages go back to the
// system (the host copy's weights stay).
TEST(MemoryGranules, ResidentParametersGiveTheHostGradientsPagesBack) {
  ModelConfig c = test::tiny_config();
  c.expert_hidden = 2048;  // 20 MB of gradients
  ZayaModel m(c);
  m.set_backend(cpu_as_device_backend());
  const size_t page = cpu_backend().memory_granule(), bytes = sizeof(float) * m.params().size();
  const auto lo = reinterpret_cast<uintptr_t>(m.params().grads());
  const uintptr_t first = (lo + page - 1) / page * page, last = (lo + bytes) / page * page;
  std::vector<unsigned char> resident((last - first) / page);
  auto resident_pages = [&] {
    EXPECT_EQ(0, mincore(reinterpret_cast<void*>(first), last - first, resident.data()));
    return std::count_if(resident.begin(), resident.end(), [](unsigned char r) { return r & 1; });
  };
  EXPECT_EQ(resident_pages(), long(resident.size())) << "written when the store was made";
  m.placement().set_resident(true);
  EXPECT_EQ(resident_pages(), 0);
}

// Two micro-batches on cpu-as-device with the gradients on demand give bitwise the gradients of
// whole ones (on_demand_gradients.h); zero_grads gives back their granules.
TEST(MemoryGranules, ModelOnDemandGradientsAreTheWholeOnes) {
  const test::OnDemandGradients r = test::run_on_demand_gradients(
      cpu_as_device_backend(), [] { return cpu_as_device_memory().used; });
  EXPECT_EQ(r.on_demand, r.whole);
  EXPECT_GE(r.bytes(), 2 * kGranule);
  EXPECT_GE(r.given_back, r.bytes() - 2 * kGranule) << "of " << r.bytes() << " gradient bytes";
}

}  // namespace
}  // namespace zaya
