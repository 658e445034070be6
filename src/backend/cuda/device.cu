#include "backend/cuda/device.h"

#include <algorithm>
#include <cstdio>
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

void copy_to_device(void* dst, const void* src, size_t bytes) {
  ZAYA_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}

void copy_to_host(void* dst, const void* src, size_t bytes) {
  ZAYA_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

void copy_on_device(void* dst, const void* src, size_t bytes) {
  if (bytes) ZAYA_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
}

void fill_zero(void* dst, size_t bytes) {
  ZAYA_CUDA_CHECK(cudaMemset(dst, 0, bytes));
}

}  // namespace zaya::cuda
