// The host's physical memory, the ceiling every plan that holds data in host memory is checked
// against (a run's evaluation batch, the sizing profile of this machine, the STREAM arrays).
#pragma once

#include <cstdint>

namespace zaya {

// Bytes of physical memory (sysconf's pages times the page size).
int64_t host_memory_bytes();

}  // namespace zaya
