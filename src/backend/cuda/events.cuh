// Two events around device work, destroyed with the object: the device's own clock for the
// timings of backend/cuda/timing.h.
#pragma once

#include "backend/cuda/vendor.h"

namespace zaya::cuda {

struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  EventPair() {
    ZAYA_CUDA_CHECK(cudaEventCreate(&start));
    ZAYA_CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~EventPair() {
    if (stop) (void)cudaEventDestroy(stop);
    if (start) (void)cudaEventDestroy(start);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  // Seconds between start and stop, once stop has been reached.
  double seconds() const {
    ZAYA_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    ZAYA_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return double(ms) * 1e-3;
  }
};

}  // namespace zaya::cuda
