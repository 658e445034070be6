// Dense and grouped matrix products on OpenBLAS. Conventions for every op in backend/cpu:
// row-major plain buffers; `*_forward` overwrites its outputs; `*_backward` ADDS into the gradient
// buffers it is given (callers zero them once per step), and skips any that are nullptr.
#pragma once

namespace zaya::cpu {

// C[m,n] = alpha * op(A) op(B) + beta * C with leading dimensions (thin cblas_sgemm wrapper).
void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc);
// The same as the Backend's op (backend_ops.inc).
inline void dense_gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                       int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// out[n, m] = in[n, k] · w[m, k]ᵀ (+ bias[m]).   (nn.Linear)
void matmul_forward(float* out, const float* in, const float* w, const float* bias, int n, int k,
                    int m);
// din[n, k] += dout · w;  dw[m, k] += doutᵀ · in;  dbias[m] += Σ_rows dout.
void matmul_backward(float* din, float* dw, float* dbias, const float* dout, const float* in,
                     const float* w, int n, int k, int m);

// Grouped (segmented) product for MoE experts: rows [offsets[g], offsets[g+1]) of `in` are
// multiplied by weights[g] ([m, k], no bias). Segments may be empty.
void grouped_matmul_forward(float* out, const float* in, const float* const* weights,
                            const int* offsets, int groups, int k, int m);
void grouped_matmul_backward(float* din, float* const* dweights, const float* dout, const float* in,
                             const float* const* weights, const int* offsets, int groups, int k,
                             int m);

}  // namespace zaya::cpu
