// When an elementwise or row-wise CPU op is worth spreading over the OpenMP threads, and the one
// way the ops spread a loop that may stay on the calling thread (for_ranges).
#pragma once

#include <omp.h>

#include <cstdint>

namespace zaya::cpu {

// Below this many elements an op runs on the calling thread: waking the other threads costs more
// than the work (libgomp's fork and join take 3 µs on a VM where a futex call is expensive), and
// a small model's decode step, or a tiny model's training step, is hundreds of such ops. Only the
// split between threads changes, never an element's arithmetic: the results are the same bits.
inline constexpr int64_t kSerialBelow = int64_t(1) << 14;

// `work` counted in elements, or in another unit with its own bound (multiply-adds).
inline bool worth_threads(int64_t work, int64_t serial_below = kSerialBelow) {
  return work >= serial_below;
}

// body(first, last) over [0, count): once per thread on contiguous ranges when `use_threads` (and
// the process has threads), else once on the calling thread, outside any parallel region. Not
// `#pragma omp parallel for if (...)`: a region whose `if` is false still builds and ends a team
// of one in libgomp, a futex call each time: 1.5 µs on a VM where system calls are expensive,
// about a hundred times a small model's decode step (stop 54). The body is a loop over its range
// compiled with its op's vector path (a lambda of the op); how the range is split must not change
// any element's arithmetic.
template <class Body>
void for_ranges(int64_t count, bool use_threads, const Body& body) {
  if (count <= 0) return;
  if (!use_threads || omp_get_max_threads() == 1) {
    body(int64_t(0), count);
    return;
  }
#pragma omp parallel
  {
    const int64_t thread = omp_get_thread_num(), threads = omp_get_num_threads();
    const int64_t first = count * thread / threads, last = count * (thread + 1) / threads;
    if (first < last) body(first, last);
  }
}

}  // namespace zaya::cpu
