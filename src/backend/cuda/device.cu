#include "backend/cuda/device.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "backend/cuda/vendor.h"

namespace zaya::cuda {

std::string unavailable_reason() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();  // clear it: the next call must not report this again
    return cudaGetErrorString(status);
  }
  return count > 0 ? std::string() : "no GPU device is visible";
}

std::string device_summary() {
  int device = 0, count = 0;
  ZAYA_CUDA_CHECK(cudaGetDevice(&device));
  ZAYA_CUDA_CHECK(cudaGetDeviceCount(&count));
  cudaDeviceProp prop{};
  ZAYA_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  char text[360];
  std::snprintf(text, sizeof(text), "GPU %d of %d: %s, %.1f GiB", device, count, prop.name,
                double(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

int select_device(int local_rank) {
  int count = 0;
  ZAYA_CUDA_CHECK(cudaGetDeviceCount(&count));
  ZAYA_CHECK(count > 0, "no GPU device is visible");
  const int device = local_rank % count;
  ZAYA_CUDA_CHECK(cudaSetDevice(device));
  return device;
}

void synchronize() {
  ZAYA_CUDA_CHECK(cudaDeviceSynchronize());
}

namespace {

// What zaya's own allocations hold (not the context's, nor the libraries' workspaces): in use
// and at most so far, for the memory plan's check (DeviceMemory::peak).
struct AllocationCount {
  std::mutex mutex;
  std::map<void*, size_t> sizes;
  size_t in_use = 0, peak = 0;
};

AllocationCount& allocation_count() {
  static AllocationCount* count = new AllocationCount;  // never destroyed: frees may come later
  return *count;
}

}  // namespace

void* device_alloc(size_t bytes) {
  void* p = nullptr;
  ZAYA_CUDA_CHECK(cudaMalloc(&p, bytes));
  AllocationCount& c = allocation_count();
  const std::lock_guard<std::mutex> lock(c.mutex);
  c.sizes[p] = bytes;
  c.in_use += bytes;
  c.peak = std::max(c.peak, c.in_use);
  return p;
}

void device_free(void* p) noexcept {
  if (!p) return;
  {
    AllocationCount& c = allocation_count();
    const std::lock_guard<std::mutex> lock(c.mutex);
    const auto it = c.sizes.find(p);
    if (it != c.sizes.end()) {
      c.in_use -= it->second;
      c.sizes.erase(it);
    }
  }
  (void)cudaFree(p);  // a destructor has nobody to tell
}

void note_device_bytes(int64_t delta) {
  AllocationCount& c = allocation_count();
  const std::lock_guard<std::mutex> lock(c.mutex);
  c.in_use = size_t(int64_t(c.in_use) + delta);
  c.peak = std::max(c.peak, c.in_use);
}

size_t allocated_bytes() {
  AllocationCount& c = allocation_count();
  const std::lock_guard<std::mutex> lock(c.mutex);
  return c.in_use;
}

size_t allocated_peak_bytes() {
  AllocationCount& c = allocation_count();
  const std::lock_guard<std::mutex> lock(c.mutex);
  return c.peak;
}

#if defined(ZAYA_CUDA_EMU)
// The emulated device: every scratch buffer its exact bytes, fresh (no rounding, no reuse), so
// AddressSanitizer sees an access past its end.
void* scratch_take(size_t bytes) {
  return device_alloc(bytes);
}
void scratch_give(void* p, size_t) noexcept {
  device_free(p);
}
#else
namespace {

struct ScratchCache {
  std::mutex mutex;
  std::map<size_t, std::vector<void*> > free;  // by block size
};

ScratchCache& scratch_cache() {
  static ScratchCache* cache = new ScratchCache;  // never destroyed: blocks outlive static order
  return *cache;
}

size_t block_size(size_t bytes) {
  size_t size = 256;
  while (size < bytes) size *= 2;
  return size;
}

}  // namespace

void* scratch_take(size_t bytes) {
  const size_t size = block_size(bytes);
  ScratchCache& cache = scratch_cache();
  {
    const std::lock_guard<std::mutex> lock(cache.mutex);
    std::vector<void*>& blocks = cache.free[size];
    if (!blocks.empty()) {
      void* p = blocks.back();
      blocks.pop_back();
      return p;
    }
  }
  void* p = nullptr;
  if (cudaMalloc(&p, size) == cudaSuccess) return p;
  (void)cudaGetLastError();
  {  // out of memory: give every cached block back to the driver and try once more
    const std::lock_guard<std::mutex> lock(cache.mutex);
    for (auto& [s, blocks] : cache.free)
      for (void* b : blocks) (void)cudaFree(b);
    cache.free.clear();
  }
  ZAYA_CUDA_CHECK(cudaMalloc(&p, size));
  return p;
}

void scratch_give(void* p, size_t bytes) noexcept {
  if (p == nullptr) return;
  ScratchCache& cache = scratch_cache();
  try {
    const std::lock_guard<std::mutex> lock(cache.mutex);
    cache.free[block_size(bytes)].push_back(p);
  } catch (...) {  // no memory for the list: free it instead
    (void)cudaFree(p);
  }
}
#endif

namespace {

// Large copies between the host and the device go through two pinned host buffers, a chunk at a
// time: the DMA engines copy only from page-locked memory, so the driver stages a copy from
// pageable memory itself, piece by piece and without overlap. Here the transfer of one chunk
// overlaps the host's copy of the other, and the pinned memory stays bounded (two chunks,
// whatever the buffer's size) where pinning a checkpoint's whole snapshot would lock gigabytes.
// The checkpoints' copies of the weights and the optimizer state take this path.
constexpr size_t kStagingChunk = size_t(16) << 20;
constexpr size_t kStagedFrom = size_t(4) << 20;  // smaller copies: one cudaMemcpy

struct PinnedStaging {
  std::mutex mutex;  // one staged copy at a time (the buffers are shared)
  void* chunk[2] = {nullptr, nullptr};
  cudaEvent_t done[2] = {nullptr, nullptr};  // the last transfer from or into each chunk
  void ensure() {
    if (chunk[0] != nullptr) return;
    for (int k = 0; k < 2; ++k) {
      ZAYA_CUDA_CHECK(cudaHostAlloc(&chunk[k], kStagingChunk, cudaHostAllocDefault));
      ZAYA_CUDA_CHECK(cudaEventCreateWithFlags(&done[k], cudaEventDisableTiming));
    }
  }
};

// Made at the first large copy and kept for the process: freeing pinned memory at exit would race
// the runtime's own teardown, and the system takes it back with the process.
PinnedStaging& pinned_staging() {
  static PinnedStaging* staging = new PinnedStaging;
  return *staging;
}

size_t chunk_bytes(size_t total, size_t i) {
  return std::min(kStagingChunk, total - i * kStagingChunk);
}

}  // namespace

// On the legacy default stream, as the kernels and cudaMemcpy are: ordered after every kernel
// launched before, and complete on return, as cudaMemcpy's copies are.
void copy_to_device(void* dst, const void* src, size_t bytes) {
  if (bytes < kStagedFrom) {
    ZAYA_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    return;
  }
  PinnedStaging& s = pinned_staging();
  const std::lock_guard<std::mutex> lock(s.mutex);
  s.ensure();
  const size_t chunks = (bytes + kStagingChunk - 1) / kStagingChunk;
  for (size_t i = 0; i < chunks; ++i) {
    const int k = int(i % 2);
    if (i >= 2) ZAYA_CUDA_CHECK(cudaEventSynchronize(s.done[k]));  // chunk i−2 has left it
    std::memcpy(s.chunk[k], static_cast<const char*>(src) + i * kStagingChunk,
                chunk_bytes(bytes, i));
    ZAYA_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(dst) + i * kStagingChunk, s.chunk[k],
                                    chunk_bytes(bytes, i), cudaMemcpyHostToDevice, 0));
    ZAYA_CUDA_CHECK(cudaEventRecord(s.done[k], 0));
  }
  for (int k = 0; k < 2; ++k) ZAYA_CUDA_CHECK(cudaEventSynchronize(s.done[k]));
}

void copy_to_host(void* dst, const void* src, size_t bytes) {
  if (bytes < kStagedFrom) {
    ZAYA_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
    return;
  }
  PinnedStaging& s = pinned_staging();
  const std::lock_guard<std::mutex> lock(s.mutex);
  s.ensure();
  const size_t chunks = (bytes + kStagingChunk - 1) / kStagingChunk;
  auto start = [&](size_t i) {  // chunk i into its pinned buffer
    const int k = int(i % 2);
    ZAYA_CUDA_CHECK(cudaMemcpyAsync(s.chunk[k], static_cast<const char*>(src) + i * kStagingChunk,
                                    chunk_bytes(bytes, i), cudaMemcpyDeviceToHost, 0));
    ZAYA_CUDA_CHECK(cudaEventRecord(s.done[k], 0));
  };
  start(0);
  if (chunks > 1) start(1);
  for (size_t i = 0; i < chunks; ++i) {
    const int k = int(i % 2);
    ZAYA_CUDA_CHECK(cudaEventSynchronize(s.done[k]));
    std::memcpy(static_cast<char*>(dst) + i * kStagingChunk, s.chunk[k], chunk_bytes(bytes, i));
    if (i + 2 < chunks) start(i + 2);  // into the buffer just emptied
  }
}

void copy_on_device(void* dst, const void* src, size_t bytes) {
  if (bytes) ZAYA_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
}

void fill_zero(void* dst, size_t bytes) {
  ZAYA_CUDA_CHECK(cudaMemset(dst, 0, bytes));
}

}  // namespace zaya::cuda
