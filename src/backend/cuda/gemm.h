// The GPU backend's GEMM entry for its own kernels (matmul.cu implements it through cuBLASLt):
// plain C++, so that files built by hipcc for the compile check include it too.
#pragma once

#include <cstdint>

namespace zaya::cuda {

// `count` products at fixed strides (in elements) between consecutive A, B and C matrices.
struct GemmBatch {
  int count = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
};

// Column-major C[m, n] = alpha · op(A) · op(B) + beta · C in fp32 (CUBLAS_COMPUTE_32F, no TF32,
// whatever Bf16Gemms says), over a strided batch.
void gemm_f32_batched(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* A,
                      int lda, const float* B, int ldb, float beta, float* C, int ldc,
                      const GemmBatch& batch);

}  // namespace zaya::cuda
