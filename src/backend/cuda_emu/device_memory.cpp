#include "backend/cuda_emu/device_memory.h"

#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>

#include "core/error.h"

namespace zaya::emu {

namespace {

struct Registry {
  std::mutex mutex;
  std::map<const char*, size_t> live;  // start → bytes
  size_t bytes = 0;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: buffers outlive static destruction
  return *r;
}

}  // namespace

void* device_allocate(size_t bytes) {
  // malloc(0) may return null or a unique pointer: one byte keeps every allocation distinct.
  char* p = static_cast<char*>(std::malloc(bytes ? bytes : 1));
  if (p == nullptr) return nullptr;
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  r.live[p] = bytes;
  r.bytes += bytes;
  return p;
}

bool device_release(void* p) {
  Registry& r = registry();
  {
    const std::lock_guard<std::mutex> lock(r.mutex);
    const auto it = r.live.find(static_cast<const char*>(p));
    if (it == r.live.end()) return false;
    r.bytes -= it->second;
    r.live.erase(it);
  }
  std::free(p);
  return true;
}

bool device_range(const void* p, size_t bytes, const void** begin, size_t* size) {
  const char* c = static_cast<const char*>(p);
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.live.upper_bound(c);
  if (it == r.live.begin()) return false;
  it = std::prev(it);
  const char* start = it->first;
  const size_t n = it->second;
  if (c + bytes > start + n) return false;
  if (begin) *begin = start;
  if (size) *size = n;
  return true;
}

void register_device_range(void* p, size_t bytes) {
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  r.live[static_cast<const char*>(p)] = bytes;
}

void unregister_device_range(void* p) {
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  r.live.erase(static_cast<const char*>(p));
}

size_t device_bytes_in_use() {
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  return r.bytes;
}

void require_device_range(const void* p, size_t bytes, const std::string& what) {
  ZAYA_CHECK(device_range(p, bytes), what, ": [", p, ", +", bytes,
             " bytes) is not inside a device allocation (a host pointer, a freed block, or past "
             "the end of one)");
}

}  // namespace zaya::emu
