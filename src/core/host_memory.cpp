#include "core/host_memory.h"

#include <unistd.h>

namespace zaya {

int64_t host_memory_bytes() {
  return int64_t(sysconf(_SC_PHYS_PAGES)) * int64_t(sysconf(_SC_PAGE_SIZE));
}

}  // namespace zaya
