// When an elementwise or row-wise CPU op is worth spreading over the OpenMP threads.
#pragma once

#include <cstdint>

namespace zaya::cpu {

// Below this many elements an op runs on the calling thread: waking the other threads costs more
// than the work (with OMP_WAIT_POLICY=passive, a futex round trip per thread and region), and a
// small model's decode step, or a tiny model's training step, is hundreds of such regions. Only
// the split between threads changes, never an element's arithmetic: the results are the same bits.
inline constexpr int64_t kSerialBelow = int64_t(1) << 14;

// `work` counted in elements, or in another unit with its own bound (multiply-adds).
inline bool worth_threads(int64_t work, int64_t serial_below = kSerialBelow) {
  return work >= serial_below;
}

}  // namespace zaya::cpu
