// The GPU as the rest of zaya sees it: plain C++ (no CUDA types), so code compiled by the host
// compiler calls it. Device memory is owned by DeviceBuffer (RAII); every copy between host and
// device is an explicit call, so each synchronisation is visible at its call site.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace zaya::cuda {

// Empty when a GPU is usable; otherwise why not ("no CUDA-capable device is detected", a driver
// too old for this build, ...), for the tests' skip messages and `zaya info`.
std::string unavailable_reason();
// The current device's index, name and memory, e.g. "GPU 0 of 8: NVIDIA H100 80GB HBM3, 79.1
// GiB" (requires a device).
std::string device_summary();
// Makes GPU local_rank % (the visible GPUs) this process's device, before any allocation: the
// ranks on a machine take one GPU each (or share them round-robin when there are fewer GPUs).
// Returns its index.
int select_device(int local_rank);
void synchronize();

void* device_alloc(size_t bytes);
void device_free(void* p) noexcept;
// The most bytes device_alloc's blocks held at once (the scratch cache's among them, and the
// virtual memory's mapped granules), and what they hold now.
size_t allocated_peak_bytes();
size_t allocated_bytes();
// Bytes of device memory taken (> 0) or given back (< 0) outside device_alloc, counted with its
// blocks (the virtual memory's granules).
void note_device_bytes(int64_t delta);

// Virtual memory (Backend::reserve, commit, decommit; virtual_memory.cu): an address range
// reserved once whose granules are mapped to physical memory, zeroed, as they are committed and
// unmapped when given back, so that views into it never move. vm_granule() is 0 where the
// device or the build has none (HIP so far, a GPU without virtual memory management).
size_t vm_granule();
void* vm_reserve(size_t bytes);           // every granule unmapped
void vm_commit(void* p, size_t bytes);    // maps the granules [p, p + bytes) touches
void vm_decommit(void* p, size_t bytes);  // unmaps the whole ones inside, zeroes the rest
bool vm_release(void* p) noexcept;        // false when p is no reservation's start

void copy_to_device(void* dst, const void* src, size_t bytes);
void copy_to_host(void* dst, const void* src, size_t bytes);
void fill_zero(void* dst, size_t bytes);
void copy_on_device(void* dst, const void* src, size_t bytes);

// Device memory for an op's temporaries, from a cache of blocks given back earlier: no
// cudaMalloc per call and, above all, no cudaFree, which waits for the whole device. Reuse is safe
// without a wait because every kernel runs in order on the default stream: a block taken again
// is only touched by work queued after its previous holder's. (Work on another stream, NCCL's,
// must be waited for before its block is given back.) Sizes are rounded up to a power of two,
// at least 256 bytes; the cache is emptied when a cudaMalloc fails, and the allocation retried.
void* scratch_take(size_t bytes);
void scratch_give(void* p, size_t bytes) noexcept;

// Where a buffer's memory comes from: cudaMalloc and cudaFree, or the scratch cache.
struct FreshMemory {
  static void* take(size_t bytes) { return device_alloc(bytes); }
  static void give(void* p, size_t) noexcept { device_free(p); }
};
struct ScratchMemory {
  static void* take(size_t bytes) { return scratch_take(bytes); }
  static void give(void* p, size_t bytes) noexcept { scratch_give(p, bytes); }
};

// Device memory of n elements of T, given back with the object.
template <typename T, typename Memory>
class BasicDeviceBuffer {
 public:
  BasicDeviceBuffer() = default;
  explicit BasicDeviceBuffer(size_t n)
      : n_(n), p_(static_cast<T*>(n ? Memory::take(n * sizeof(T)) : nullptr)) {}
  explicit BasicDeviceBuffer(const std::vector<T>& host) : BasicDeviceBuffer(host.size()) {
    upload(host);
  }
  BasicDeviceBuffer(const BasicDeviceBuffer&) = delete;
  BasicDeviceBuffer& operator=(const BasicDeviceBuffer&) = delete;
  BasicDeviceBuffer(BasicDeviceBuffer&& o) noexcept
      : n_(std::exchange(o.n_, 0)), p_(std::exchange(o.p_, nullptr)) {}
  BasicDeviceBuffer& operator=(BasicDeviceBuffer&& o) noexcept {
    std::swap(n_, o.n_);
    std::swap(p_, o.p_);
    return *this;
  }
  ~BasicDeviceBuffer() {
    if (p_) Memory::give(p_, n_ * sizeof(T));
  }

  T* get() { return p_; }
  const T* get() const { return p_; }
  size_t size() const { return n_; }
  void upload(const std::vector<T>& host) { copy_to_device(p_, host.data(), n_ * sizeof(T)); }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    copy_to_host(host.data(), p_, n_ * sizeof(T));
    return host;
  }
  void zero() { fill_zero(p_, n_ * sizeof(T)); }

 private:
  size_t n_ = 0;
  T* p_ = nullptr;
};

// Buffers of their own (freed with the object), and temporaries of one op (the scratch cache).
template <typename T>
using DeviceBuffer = BasicDeviceBuffer<T, FreshMemory>;
template <typename T>
using ScratchBuffer = BasicDeviceBuffer<T, ScratchMemory>;

// A reused buffer with room for n elements: replaced when it holds fewer, once the device has
// finished the queued work that may still read the old one. Its contents are not kept.
template <typename T>
T* grown(DeviceBuffer<T>& b, size_t n) {
  if (b.size() < n) {
    synchronize();
    b = DeviceBuffer<T>(n);
  }
  return b.get();
}

}  // namespace zaya::cuda
