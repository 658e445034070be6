// A start-up check that the BLAS computes right. Debian's OpenBLAS has given wrong products with
// some kernel and cache-size settings on some CPUs (AVX-512 EPYCs need OPENBLAS_CORETYPE=Haswell
// OPENBLAS_L2_SIZE=512 in their environment); a run on such a library would train on garbage
// without a word. So every process multiplies a few matrices in the shapes and transposes zaya uses
// and holds each entry to a float64 reference within fp32's worst-case error bound, in a few
// milliseconds, before anything is trained.
#pragma once

#include <functional>
#include <string>

namespace zaya::cpu::blas {

// C[m,n] = alpha * op(A) op(B) + beta * C, row-major with leading dimensions (cpu::gemm's shape).
using GemmFunction =
    std::function<void(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                       int lda, const float* b, int ldb, float beta, float* c, int ldc)>;

struct SelfCheckResult {
  bool ok = true;
  int products = 0;          // products checked
  long long entries = 0;     // entries held to the float64 reference
  double worst_ratio = 0.0;  // the largest |error| / bound over those entries (<= 1 passes)
  std::string failure;       // the first entry out of bound: product, position, values
};

// Runs the products through `gemm` and compares. The error bound of an entry is
// (k + 2) * 2^-24 * (|alpha| sum_l |a_il b_lj| + |beta c_ij|) (plus the smallest normal float):
// any order of fp32 sums and fused multiply-adds stays within it, and broken kernels (a lost
// block, a wrong stride, garbage) miss it by orders of magnitude.
SelfCheckResult check_gemm(const GemmFunction& gemm);

}  // namespace zaya::cpu::blas
