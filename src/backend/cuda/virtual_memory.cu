// Device memory taken and given back granule by granule (device.h, "Virtual memory"): what
// ZeRO-2 keeps its gradients in (optim/zero2_reduce.h), so that the pages of a stage whose
// gradients have moved to their owners go back to the device while the backward goes on. An
// address range is reserved once, so the model's views of the gradients never move; a granule
// is mapped to physical memory (zeroed) when something in it is committed and unmapped when it
// is given back.
//   CUDA: the driver's virtual memory management (cuMemAddressReserve, cuMemCreate, cuMemMap,
//         cuMemSetAccess, cuMemUnmap), reached through the runtime's entry points so that the
//         plugin links no libcuda;
//   the emulated device: host pages, inaccessible (PROT_NONE) while unmapped, so a kernel that
//         touches a gradient ZeRO-2 gave back faults as it would on the GPU;
//   HIP: not built yet (vm_granule() 0: the backend then refuses ZeRO-2).
#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "backend/cuda/device.h"
#include "backend/cuda/vendor.h"

#if defined(ZAYA_CUDA_EMU)
#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "backend/cuda_emu/device_memory.h"
#elif !defined(ZAYA_HIP)
#include <cuda.h>
#endif

namespace zaya::cuda {

namespace {

// The platform's four moves, on whole granules.
#if defined(ZAYA_CUDA_EMU)
constexpr size_t kEmuGranule = size_t(2) << 20;  // CUDA's usual granularity
size_t platform_granule() {
  return kEmuGranule;
}
uintptr_t platform_reserve(size_t span) {
  void* p = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ZAYA_CHECK(p != MAP_FAILED, "emulated device: reserving ", span,
             " bytes failed: ", std::strerror(errno));
  emu::register_device_range(p, span);
  return reinterpret_cast<uintptr_t>(p);
}
uint64_t platform_map(uintptr_t at, size_t granule) {
  ZAYA_CHECK(mprotect(reinterpret_cast<void*>(at), granule, PROT_READ | PROT_WRITE) == 0,
             "emulated device: mapping a granule failed: ", std::strerror(errno));
  return 1;  // reads as zero: an anonymous page never written, or given back by MADV_DONTNEED
}
void platform_unmap(uintptr_t at, size_t granule, uint64_t) {
  madvise(reinterpret_cast<void*>(at), granule, MADV_DONTNEED);
  mprotect(reinterpret_cast<void*>(at), granule, PROT_NONE);
}
void platform_free(uintptr_t base, size_t span) {
  emu::unregister_device_range(reinterpret_cast<void*>(base));
  munmap(reinterpret_cast<void*>(base), span);
}
#elif defined(ZAYA_HIP)
size_t platform_granule() {
  return 0;
}
uintptr_t platform_reserve(size_t) {
  ZAYA_FAIL("device virtual memory is not built for HIP yet");
}
uint64_t platform_map(uintptr_t, size_t) {
  ZAYA_FAIL("device virtual memory is not built for HIP yet");
}
void platform_unmap(uintptr_t, size_t, uint64_t) {}
void platform_free(uintptr_t, size_t) {}
#else
// The driver calls, from the runtime's entry points (CUDA 12.0's versions of them).
struct DriverVm {
  decltype(&cuMemGetAllocationGranularity) granularity = nullptr;
  decltype(&cuMemAddressReserve) reserve = nullptr;
  decltype(&cuMemAddressFree) free = nullptr;
  decltype(&cuMemCreate) create = nullptr;
  decltype(&cuMemRelease) release = nullptr;
  decltype(&cuMemMap) map = nullptr;
  decltype(&cuMemUnmap) unmap = nullptr;
  decltype(&cuMemSetAccess) set_access = nullptr;
  decltype(&cuDeviceGetAttribute) attribute = nullptr;
  bool complete = false;
};
template <typename Fn>
bool entry_point(const char* name, Fn& fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess || p == nullptr) {
    (void)cudaGetLastError();
    return false;
  }
  fn = reinterpret_cast<Fn>(p);
  return true;
}
const DriverVm& driver_vm() {
  static const DriverVm vm = [] {
    DriverVm d;
    d.complete = entry_point("cuMemGetAllocationGranularity", d.granularity) &&
                 entry_point("cuMemAddressReserve", d.reserve) &&
                 entry_point("cuMemAddressFree", d.free) && entry_point("cuMemCreate", d.create) &&
                 entry_point("cuMemRelease", d.release) && entry_point("cuMemMap", d.map) &&
                 entry_point("cuMemUnmap", d.unmap) &&
                 entry_point("cuMemSetAccess", d.set_access) &&
                 entry_point("cuDeviceGetAttribute", d.attribute);
    return d;
  }();
  return vm;
}
#define ZAYA_CU_CHECK(call)                    \
  do {                                         \
    const CUresult zaya_cu_status = (call);    \
    ZAYA_CHECK(zaya_cu_status == CUDA_SUCCESS, \
               "device virtual memory: " #call \
               " failed "                      \
               "(CUresult ",                   \
               int(zaya_cu_status), ")");      \
  } while (0)
CUmemAllocationProp allocation_prop() {
  int device = 0;
  ZAYA_CUDA_CHECK(cudaGetDevice(&device));
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}
size_t platform_granule() {
  const DriverVm& d = driver_vm();
  if (!d.complete) return 0;
  int device = 0, supported = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      d.attribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device) !=
          CUDA_SUCCESS ||
      !supported) {
    (void)cudaGetLastError();
    return 0;
  }
  const CUmemAllocationProp prop = allocation_prop();
  size_t granule = 0;
  if (d.granularity(&granule, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS) return 0;
  return granule;
}
uintptr_t platform_reserve(size_t span) {
  CUdeviceptr p = 0;
  ZAYA_CU_CHECK(driver_vm().reserve(&p, span, vm_granule(), 0, 0));
  return uintptr_t(p);
}
uint64_t platform_map(uintptr_t at, size_t granule) {
  const DriverVm& d = driver_vm();
  const CUmemAllocationProp prop = allocation_prop();
  CUmemGenericAllocationHandle handle = 0;
  ZAYA_CU_CHECK(d.create(&handle, granule, &prop, 0));
  ZAYA_CU_CHECK(d.map(CUdeviceptr(at), granule, 0, handle, 0));
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  ZAYA_CU_CHECK(d.set_access(CUdeviceptr(at), granule, &access, 1));
  ZAYA_CUDA_CHECK(cudaMemset(reinterpret_cast<void*>(at), 0, granule));  // fresh memory: zero
  return uint64_t(handle);
}
void platform_unmap(uintptr_t at, size_t granule, uint64_t handle) {
  (void)driver_vm().unmap(CUdeviceptr(at), granule);
  (void)driver_vm().release(CUmemGenericAllocationHandle(handle));
}
void platform_free(uintptr_t base, size_t span) {
  (void)driver_vm().free(CUdeviceptr(base), span);
}
#endif

// One reservation: the bytes asked for, and per granule the physical memory mapped there (0:
// none).
struct Reservation {
  size_t bytes = 0;
  std::vector<uint64_t> mapped;
};
struct Reservations {
  std::mutex mutex;
  std::map<uintptr_t, Reservation> by_base;
};
Reservations& reservations() {
  static Reservations* r = new Reservations;  // never destroyed: buffers outlive static order
  return *r;
}

// The reservation holding p (the lock held), or nullptr.
std::pair<const uintptr_t, Reservation>* holding(Reservations& r, const void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  auto it = r.by_base.upper_bound(at);
  if (it == r.by_base.begin()) return nullptr;
  --it;
  return at < it->first + it->second.bytes ? &*it : nullptr;
}

}  // namespace

size_t vm_granule() {
  static const size_t granule = platform_granule();
  return granule;
}

void* vm_reserve(size_t bytes) {
  const size_t g = vm_granule();
  ZAYA_CHECK(g > 0, "device virtual memory: this device or build has none");
  const size_t granules = (std::max<size_t>(bytes, 1) + g - 1) / g;
  const uintptr_t base = platform_reserve(granules * g);
  Reservations& r = reservations();
  const std::lock_guard<std::mutex> lock(r.mutex);
  r.by_base[base] = Reservation{bytes, std::vector<uint64_t>(granules, 0)};
  return reinterpret_cast<void*>(base);
}

void vm_commit(void* p, size_t bytes) {
  if (bytes == 0) return;
  const size_t g = vm_granule();
  Reservations& r = reservations();
  const std::lock_guard<std::mutex> lock(r.mutex);
  auto* res = holding(r, p);
  ZAYA_CHECK(res, "device virtual memory: commit of ", p, " outside every reservation");
  const uintptr_t base = res->first, at = reinterpret_cast<uintptr_t>(p);
  for (size_t k = (at - base) / g; k * g < at + bytes - base; ++k) {
    if (res->second.mapped[k]) continue;
    res->second.mapped[k] = platform_map(base + k * g, g);
    note_device_bytes(int64_t(g));
  }
}

void vm_decommit(void* p, size_t bytes) {
  if (bytes == 0) return;
  const size_t g = vm_granule();
  Reservations& r = reservations();
  const std::lock_guard<std::mutex> lock(r.mutex);
  auto* res = holding(r, p);
  ZAYA_CHECK(res, "device virtual memory: decommit of ", p, " outside every reservation");
  const uintptr_t base = res->first, lo = reinterpret_cast<uintptr_t>(p), hi = lo + bytes;
  // Work queued before may still read what is given back: unmapping waits for nothing.
  synchronize();
  for (size_t k = (lo - base) / g; k * g < hi - base; ++k) {
    if (!res->second.mapped[k]) continue;
    const uintptr_t a = base + k * g, b = a + g;
    if (lo <= a && b <= hi) {  // whole inside: given back
      platform_unmap(a, g, res->second.mapped[k]);
      res->second.mapped[k] = 0;
      note_device_bytes(-int64_t(g));
    } else {  // the part inside is zeroed
      const uintptr_t from = std::max(a, lo), to = std::min(b, hi);
      fill_zero(reinterpret_cast<void*>(from), size_t(to - from));
    }
  }
}

bool vm_release(void* p) noexcept {
  Reservation res;
  const auto base = reinterpret_cast<uintptr_t>(p);
  {
    Reservations& r = reservations();
    const std::lock_guard<std::mutex> lock(r.mutex);
    const auto it = r.by_base.find(base);
    if (it == r.by_base.end()) return false;
    res = std::move(it->second);
    r.by_base.erase(it);
  }
  const size_t g = vm_granule();
  (void)cudaDeviceSynchronize();  // nothing queued may still use it
  for (size_t k = 0; k < res.mapped.size(); ++k)
    if (res.mapped[k]) {
      platform_unmap(base + k * g, g, res.mapped[k]);
      note_device_bytes(-int64_t(g));
    }
  platform_free(base, res.mapped.size() * g);
  return true;
}

}  // namespace zaya::cuda
