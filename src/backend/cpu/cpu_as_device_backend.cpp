#include "backend/cpu/cpu_as_device_backend.h"

#include <atomic>

namespace zaya {

namespace {

// Each block carries its size in front of what the caller gets (64 bytes, keeping the 64-byte
// alignment), so that release can count it off.
constexpr size_t kHeader = 64;
std::atomic<size_t> g_used{0}, g_peak{0};

}  // namespace

void* CpuAsDeviceBackend::allocate(size_t bytes) const {
  auto* block = static_cast<std::byte*>(CpuBackend::allocate(bytes + kHeader));
  *reinterpret_cast<size_t*>(block) = bytes;
  const size_t used = g_used.fetch_add(bytes) + bytes;
  size_t peak = g_peak.load();
  while (used > peak && !g_peak.compare_exchange_weak(peak, used)) {
  }
  return block + kHeader;
}

void CpuAsDeviceBackend::release(void* p) const noexcept {
  if (p == nullptr) return;
  std::byte* block = static_cast<std::byte*>(p) - kHeader;
  g_used.fetch_sub(*reinterpret_cast<size_t*>(block));
  CpuBackend::release(block);
}

CountedMemory cpu_as_device_memory() {
  return {g_used.load(), g_peak.load()};
}

}  // namespace zaya
