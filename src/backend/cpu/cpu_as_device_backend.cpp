#include "backend/cpu/cpu_as_device_backend.h"

#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <set>

#include "backend/cpu/memory_granules.h"
#include "core/error.h"

namespace zaya {

namespace {

// Each block carries its size in front of what the caller gets (64 bytes, keeping the 64-byte
// alignment), so that release can count it off.
constexpr size_t kHeader = 64;
std::atomic<size_t> g_used{0}, g_peak{0};

void count_in(size_t bytes) {
  const size_t used = g_used.fetch_add(bytes) + bytes;
  size_t peak = g_peak.load();
  while (used > peak && !g_peak.compare_exchange_weak(peak, used)) {
  }
}

// The granules given back, by address (every cpu-as-device backend's), under one lock.
std::mutex g_granules_lock;
std::set<uintptr_t>& given_back() {
  static std::set<uintptr_t> granules;
  return granules;
}

void protect(uintptr_t granule, int prot) {
  ZAYA_CHECK(mprotect(reinterpret_cast<void*>(granule), CpuAsDeviceBackend::kGranule, prot) == 0,
             "cpu-as-device: mprotect of a ", CpuAsDeviceBackend::kGranule >> 20,
             " MiB granule failed: ", std::strerror(errno));
}

// Gives back the whole granules of [p, p + bytes) not given back yet; returns their bytes.
size_t give_back(void* p, size_t bytes) {
  const cpu::GranuleSpan span = cpu::whole_granules(p, bytes, CpuAsDeviceBackend::kGranule);
  size_t freed = 0;
  const std::lock_guard<std::mutex> lock(g_granules_lock);
  for (uintptr_t g = span.begin; g < span.end; g += CpuAsDeviceBackend::kGranule) {
    if (!given_back().insert(g).second) continue;
    cpu::give_back_pages(g, CpuAsDeviceBackend::kGranule);
    protect(g, PROT_NONE);
    freed += CpuAsDeviceBackend::kGranule;
  }
  return freed;
}

}  // namespace

void* CpuAsDeviceBackend::allocate(size_t bytes) const {
  auto* block = static_cast<std::byte*>(CpuBackend::allocate(bytes + kHeader));
  *reinterpret_cast<size_t*>(block) = bytes;
  count_in(bytes);
  return block + kHeader;
}

void* CpuAsDeviceBackend::reserve(size_t bytes) const {
  auto* block = static_cast<std::byte*>(CpuBackend::allocate(bytes + kHeader));
  *reinterpret_cast<size_t*>(block) = bytes;
  std::byte* p = block + kHeader;
  CpuBackend::fill_zero(p, bytes);
  const size_t freed = give_back(p, bytes);
  count_in(bytes - freed);
  return p;
}

void CpuAsDeviceBackend::decommit(void* p, size_t bytes) const {
  const auto lo = reinterpret_cast<uintptr_t>(p), hi = lo + bytes;
  const cpu::GranuleSpan span = cpu::whole_granules(p, bytes, kGranule);
  // The parts of granules not whole inside are zeroed, where not given back already.
  const auto zero_part = [&](uintptr_t a, uintptr_t b) {
    if (b <= a) return;
    bool gone = false;
    {
      const std::lock_guard<std::mutex> lock(g_granules_lock);
      gone = given_back().count(a / kGranule * kGranule) > 0;
    }
    if (!gone) fill_zero(reinterpret_cast<void*>(a), size_t(b - a));
  };
  if (span.bytes() == 0) {  // within one granule, or across the boundary of two
    const uintptr_t mid = std::min(hi, (lo / kGranule + 1) * kGranule);
    zero_part(lo, mid);
    zero_part(mid, hi);
    return;
  }
  zero_part(lo, span.begin);
  zero_part(span.end, hi);
  g_used.fetch_sub(give_back(p, bytes));
}

void CpuAsDeviceBackend::commit(void* p, size_t bytes) const {
  if (bytes == 0) return;
  // Every granule [p, p + bytes) touches, whole or not.
  const auto lo = reinterpret_cast<uintptr_t>(p) / kGranule * kGranule;
  const auto hi = reinterpret_cast<uintptr_t>(p) + bytes;
  size_t taken = 0;
  {
    const std::lock_guard<std::mutex> lock(g_granules_lock);
    auto& granules = given_back();
    for (auto it = granules.lower_bound(lo); it != granules.end() && *it < hi;) {
      protect(*it, PROT_READ | PROT_WRITE);  // reads as zero: MADV_DONTNEED left no page
      taken += kGranule;
      it = granules.erase(it);
    }
  }
  if (taken) count_in(taken);
}

void CpuAsDeviceBackend::release(void* p) const noexcept {
  if (p == nullptr) return;
  std::byte* block = static_cast<std::byte*>(p) - kHeader;
  const size_t bytes = *reinterpret_cast<size_t*>(block);
  size_t given = 0;  // granules of this block still given back: accessible again, not counted
  {
    const std::lock_guard<std::mutex> lock(g_granules_lock);
    auto& granules = given_back();
    const auto lo = reinterpret_cast<uintptr_t>(p);
    for (auto it = granules.lower_bound(lo); it != granules.end() && *it < lo + bytes;) {
      mprotect(reinterpret_cast<void*>(*it), kGranule, PROT_READ | PROT_WRITE);
      given += kGranule;
      it = granules.erase(it);
    }
  }
  g_used.fetch_sub(bytes - given);
  CpuBackend::release(block);
}

CountedMemory cpu_as_device_memory() {
  return {g_used.load(), g_peak.load()};
}

}  // namespace zaya
