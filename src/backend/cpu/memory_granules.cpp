#include "backend/cpu/memory_granules.h"

#include <sys/mman.h>
#include <unistd.h>

namespace zaya::cpu {

GranuleSpan whole_granules(const void* p, size_t bytes, size_t granule) {
  if (granule == 0) return {};
  const auto lo = reinterpret_cast<uintptr_t>(p), hi = lo + bytes;
  const uintptr_t begin = (lo + granule - 1) / granule * granule, end = hi / granule * granule;
  if (begin >= end) return {};
  return {begin, end};
}

size_t host_page_bytes() {
  static const size_t bytes = [] {
    const long page = sysconf(_SC_PAGESIZE);
    return page > 0 ? size_t(page) : size_t(4096);
  }();
  return bytes;
}

bool give_back_pages(uintptr_t begin, size_t bytes) {
  return bytes == 0 || madvise(reinterpret_cast<void*>(begin), bytes, MADV_DONTNEED) == 0;
}

}  // namespace zaya::cpu
