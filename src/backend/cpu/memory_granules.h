// The host side of Backend's commit / decommit (backend/backend.h): which whole granules a byte
// range holds, and giving host pages back to the kernel.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zaya::cpu {

// The whole granules (`granule` bytes, aligned to it in the address space) inside [p, p + bytes):
// [begin, end), empty (begin == end) when there is none.
struct GranuleSpan {
  uintptr_t begin = 0, end = 0;
  size_t bytes() const { return size_t(end - begin); }
};
GranuleSpan whole_granules(const void* p, size_t bytes, size_t granule);

// The host's page size (sysconf), once.
size_t host_page_bytes();

// madvise(MADV_DONTNEED) over whole pages: private anonymous memory reads as zero afterwards and
// holds no physical page until it is written. Returns false where the kernel refused.
bool give_back_pages(uintptr_t begin, size_t bytes);

}  // namespace zaya::cpu
