// Copies between the host and the device (backend/cuda/device.cu): from 4 MiB on they go through
// two pinned 16 MiB chunks, the transfer of one overlapping the host's copy of the other. Every
// size around the chunks' edges, from and to offsets that are not a chunk's multiple, comes back
// bit for bit, and the bytes beside the destination are left alone.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "backend/cuda/cuda_backend.h"

namespace zaya {
namespace {

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed;
  for (auto& b : v) {
    x = x * 1664525u + 1013904223u;
    b = uint8_t(x >> 24);
  }
  return v;
}

TEST(GpuStagedCopies, EverySizeAroundTheChunksRoundTripsBitwise) {
  const Backend& be = cuda_backend();
  const size_t mib = size_t(1) << 20;
  // Below the staging, at its threshold, one chunk and a byte, two chunks exactly, and more
  // chunks than buffers with a ragged tail.
  for (const size_t bytes : {mib, 4 * mib, 16 * mib + 1, 32 * mib, 53 * mib + 12345}) {
    const size_t offset = 7;  // neither side on a chunk's boundary
    BackendBuffer dev(be, bytes + 2 * offset);
    const std::vector<uint8_t> sent = pattern(bytes, uint32_t(bytes));
    be.fill_zero(dev.get(), bytes + 2 * offset);
    be.to_device(static_cast<uint8_t*>(dev.get()) + offset, sent.data(), bytes);
    std::vector<uint8_t> back(bytes + 2 * offset, 0xAB);
    be.to_host(back.data() + offset, static_cast<const uint8_t*>(dev.get()) + offset, bytes);
    EXPECT_TRUE(std::equal(sent.begin(), sent.end(), back.begin() + long(offset)))
        << bytes << " bytes";
    for (size_t i = 0; i < offset; ++i) {
      EXPECT_EQ(back[i], 0xAB) << "before the destination, " << bytes << " bytes";
      EXPECT_EQ(back[offset + bytes + i], 0xAB) << "after the destination, " << bytes << " bytes";
    }
    // The device's bytes beside the copy stay zero.
    std::vector<uint8_t> whole(bytes + 2 * offset);
    be.to_host(whole.data(), dev.get(), whole.size());
    for (size_t i = 0; i < offset; ++i) {
      EXPECT_EQ(whole[i], 0) << bytes << " bytes";
      EXPECT_EQ(whole[offset + bytes + i], 0) << bytes << " bytes";
    }
  }
}

}  // namespace
}  // namespace zaya
