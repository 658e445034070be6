// STREAM's four kernels on the device (McCalpin's copy, scale, add and triad over float arrays),
// for `zaya bench membw --device cuda`. Bytes are counted the way STREAM counts them (2 arrays
// moved by copy and scale, 3 by add and triad); the caller does that, this file only times.
#include <algorithm>

#include "backend/cuda/device.h"
#include "backend/cuda/events.cuh"
#include "backend/cuda/reduce.cuh"
#include "backend/cuda/timing.h"
#include "backend/cuda/vendor.h"

namespace zaya::cuda {

namespace {

constexpr float kScalar = 3.0f;  // STREAM's q

__global__ void stream_kernel(int kernel, float* a, float* b, float* c, long n) {
  const long stride = long(gridDim.x) * blockDim.x;
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    switch (kernel) {
      case 0:
        c[i] = a[i];
        break;
      case 1:
        b[i] = kScalar * c[i];
        break;
      case 2:
        c[i] = a[i] + b[i];
        break;
      default:
        a[i] = b[i] + kScalar * c[i];
        break;
    }
  }
}

}  // namespace

double time_stream_kernel(int kernel, size_t n, int runs) {
  ZAYA_CHECK(kernel >= 0 && kernel <= 3 && n > 0 && runs > 0, "time_stream_kernel: kernel ", kernel,
             ", n ", n, ", runs ", runs);
  DeviceBuffer<float> a(n), b(n), c(n);
  a.zero();
  b.zero();
  c.zero();
  // Enough blocks to fill any current GPU several times over; the grid-stride loop does the rest.
  const unsigned blocks = blocks_for(long(n), 256) < 65536 ? blocks_for(long(n), 256) : 65536;
  ZAYA_LAUNCH(stream_kernel, blocks, 256, 0, 0)(kernel, a.get(), b.get(), c.get(), long(n));
  ZAYA_CUDA_LAUNCHED("stream_kernel");
  // Each launch between its own events; the fastest counts (STREAM's rule).
  double best = 1e300;
  for (int r = 0; r < runs; ++r) {
    EventPair events;
    ZAYA_CUDA_CHECK(cudaEventRecord(events.start));
    ZAYA_LAUNCH(stream_kernel, blocks, 256, 0, 0)(kernel, a.get(), b.get(), c.get(), long(n));
    ZAYA_CUDA_LAUNCHED("stream_kernel");
    ZAYA_CUDA_CHECK(cudaEventRecord(events.stop));
    best = std::min(best, events.seconds());
  }
  return best;
}

void device_memory(size_t* used, size_t* total, size_t* peak) {
  size_t free_bytes = 0, total_bytes = 0;
  ZAYA_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  *used = total_bytes - free_bytes;
  *total = total_bytes;
  *peak = allocated_peak_bytes();
}

}  // namespace zaya::cuda
