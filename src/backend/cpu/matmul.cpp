#include "backend/cpu/matmul.h"
#include <cstddef>

#include <cblas.h>

#include <algorithm>
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

namespace {

// OpenBLAS does not compute a row of C the same way at every call shape: the kernel's row unrolling
// and its tail handling give a row a different rounding depending on how many rows the call has and
// where the row sits among them (seen with the Haswell kernels, which Debian's OpenBLAS must use on
// some AVX-512 EPYC machines, and with the small-matrix path of the SkylakeX kernels). An expert's
// row count depends on where every other token of the micro-batch was routed, later tokens
// included, so one call per expert let a future token move a past token's output by an ulp: the
// model was not exactly causal. Row-wise products here are therefore always made of calls of
// exactly kRowTile rows. A row's rounding then depends only on its position in its expert's
// segment, which only earlier tokens decide. The last, partial tile goes through a zero-padded
// copy.
constexpr int kRowTile = 64;

// out[rows, m] (ldc) = alpha · in[rows, k] (lda) · op(w) with op(w) of shape [k, m]: w is [m, k]
// when trans_w (nn.Linear's forward) and [k, m] otherwise (the input gradient). Accumulates into
// out when beta is 1.
void row_tiled_gemm(bool trans_w, int rows, int k, int m, const float* in, const float* w,
                    float beta, float* out) {
  const int ldw = trans_w ? k : m;
  const int full = rows / kRowTile * kRowTile;
  for (int r = 0; r < full; r += kRowTile)
    gemm(false, trans_w, kRowTile, m, k, 1.0f, in + size_t(r) * k, k, w, ldw, beta,
         out + size_t(r) * m, m);
  const int rest = rows - full;
  if (rest == 0) return;
  std::vector<float> a(size_t(kRowTile) * k, 0.0f), c(size_t(kRowTile) * m, 0.0f);
  std::copy(in + size_t(full) * k, in + size_t(rows) * k, a.begin());
  if (beta != 0.0f) std::copy(out + size_t(full) * m, out + size_t(rows) * m, c.begin());
  gemm(false, trans_w, kRowTile, m, k, 1.0f, a.data(), k, w, ldw, beta, c.data(), m);
  std::copy(c.begin(), c.begin() + size_t(rest) * m, out + size_t(full) * m);
}

}  // namespace

void grouped_matmul_forward(float* out, const float* in, const float* const* weights,
                            const int* offsets, int groups, int k, int m) {
  for (int g = 0; g < groups; ++g) {
    const int rows = offsets[g + 1] - offsets[g];
    if (rows == 0) continue;
    row_tiled_gemm(true, rows, k, m, in + size_t(offsets[g]) * k, weights[g], 0.0f,
                   out + size_t(offsets[g]) * m);
  }
}

void grouped_matmul_backward(float* din, float* const* dweights, const float* dout, const float* in,
                             const float* const* weights, const int* offsets, int groups, int k,
                             int m) {
  for (int g = 0; g < groups; ++g) {
    const int rows = offsets[g + 1] - offsets[g];
    if (rows == 0) continue;
    const size_t first = size_t(offsets[g]);
    // din is row-wise like the forward (a token's input gradient does not depend on the segment's
    // size); dw sums over the segment's rows and is one call.
    if (din) row_tiled_gemm(false, rows, m, k, dout + first * m, weights[g], 1.0f, din + first * k);
    if (dweights)
      gemm(true, false, m, k, rows, 1.0f, dout + first * m, m, in + first * k, k, 1.0f, dweights[g],
           k);
  }
}

}  // namespace zaya::cpu
