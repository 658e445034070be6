#include "backend/cpu/matmul.h"
#include <cstddef>

#include <cblas.h>

#include <vector>

#include "backend/cpu/reduce.h"

namespace zaya::cpu {

void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void matmul_forward(float* out, const float* in, const float* w, const float* bias, int n, int k,
                    int m) {
  gemm(false, true, n, m, k, 1.0f, in, k, w, k, 0.0f, out, m);
  if (bias) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < m; ++j) out[size_t(i) * m + j] += bias[j];
  }
}

void matmul_backward(float* din, float* dw, float* dbias, const float* dout, const float* in,
                     const float* w, int n, int k, int m) {
  if (din) gemm(false, false, n, k, m, 1.0f, dout, m, w, k, 1.0f, din, k);
  if (dw) gemm(true, false, m, k, n, 1.0f, dout, m, in, k, 1.0f, dw, k);
  if (dbias) {
    std::vector<double> sum(m);
    column_dot(sum.data(), dout, nullptr, nullptr, nullptr, n, m);
    for (int j = 0; j < m; ++j) dbias[j] += float(sum[j]);
  }
}

void grouped_matmul_forward(float* out, const float* in, const float* const* weights,
                            const int* offsets, int groups, int k, int m) {
  for (int g = 0; g < groups; ++g) {
    const int rows = offsets[g + 1] - offsets[g];
    if (rows == 0) continue;
    matmul_forward(out + size_t(offsets[g]) * m, in + size_t(offsets[g]) * k, weights[g], nullptr,
                   rows, k, m);
  }
}

void grouped_matmul_backward(float* din, float* const* dweights, const float* dout, const float* in,
                             const float* const* weights, const int* offsets, int groups, int k,
                             int m) {
  for (int g = 0; g < groups; ++g) {
    const int rows = offsets[g + 1] - offsets[g];
    if (rows == 0) continue;
    matmul_backward(din ? din + size_t(offsets[g]) * k : nullptr, dweights ? dweights[g] : nullptr,
                    nullptr, dout + size_t(offsets[g]) * m, in + size_t(offsets[g]) * k, weights[g],
                    rows, k, m);
  }
}

}  // namespace zaya::cpu
