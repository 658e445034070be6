// The GPU tests' main: without a usable GPU it prints why and exits 77, which ctest reports as
// skipped (never as passed).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "backend/cuda/device.h"

int main(int argc, char** argv) {
  const std::string reason = zaya::cuda::unavailable_reason();
  if (!reason.empty()) {
    std::printf("SKIPPED: no usable GPU (%s); the GPU ops were not checked\n", reason.c_str());
    return 77;
  }
  std::printf("GPU: %s\n", zaya::cuda::device_summary().c_str());
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
