#include "core/reserved_addresses.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace zaya {

ReservedAddresses::ReservedAddresses(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  void* p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ZAYA_CHECK(p != MAP_FAILED, "cannot reserve ", bytes,
             " bytes of address space: ", std::strerror(errno));
  p_ = p;
}

ReservedAddresses::ReservedAddresses(ReservedAddresses&& o) noexcept
    : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

ReservedAddresses& ReservedAddresses::operator=(ReservedAddresses&& o) noexcept {
  if (this != &o) {
    reset();
    p_ = std::exchange(o.p_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void ReservedAddresses::reset() noexcept {
  if (p_ != nullptr) munmap(p_, bytes_);
  p_ = nullptr;
  bytes_ = 0;
}

}  // namespace zaya
