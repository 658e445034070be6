// The test program's main: the BLAS kernels chosen and self-checked as zaya's own main does
// (backend/cpu/blas_startup.h), so the tests compute with the kernels users get, then gtest.
#include <cstdio>

#include <gtest/gtest.h>

#include "backend/cpu/blas_startup.h"
#include "core/error.h"

int main(int argc, char** argv) {
  try {
    zaya::cpu::blas::prepare_blas(argc, argv);
  } catch (const zaya::Error& e) {
    std::fprintf(stderr, "zaya_tests: %s\n", e.what());
    return 1;
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
