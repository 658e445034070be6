// The emulated device's matrix products: what matmul.cu asks of cuBLASLt (its one product entry),
// done by OpenBLAS. Column-major, as cuBLAS: C[m, n] = alpha · op(A) · op(B) + beta · C over a
// strided batch. bf16 inputs are widened to fp32 (exact) and the products accumulated in fp32;
// a bf16 output is widened, updated in fp32 and rounded once, as cuBLASLt's fp32 compute type
// does. The sums run in OpenBLAS's order, not cuBLAS's: the emulated device is held to the CPU
// within the same tolerances as a GPU, not bitwise.
#pragma once

#include <cstdint>

namespace zaya::emu {

struct GemmCall {
  bool bf16_inputs = false, bf16_output = false;
  bool trans_a = false, trans_b = false;
  int m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  const void* a = nullptr;
  int lda = 0;
  const void* b = nullptr;
  int ldb = 0;
  float beta = 0.0f;
  void* c = nullptr;
  int ldc = 0;
  int count = 1;  // the batch: matrices at these strides (in elements)
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};

// Throws zaya::Error when an operand lies outside the device allocations.
void gemm_column_major(const GemmCall& call);

}  // namespace zaya::emu
