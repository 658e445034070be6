// Matrix products through cuBLASLt, the one GEMM entry of the GPU backend. The fp32 path computes
// in fp32 (CUBLAS_COMPUTE_32F: no TF32), so it can be held to the CPU at 1e-5. cuBLAS gives the
// same bits on every run on GPUs of one architecture and SM count (its reproducibility
// guarantee), which keeps GPU training bitwise repeatable.
//
// Row-major A[r, c] is, to column-major cuBLAS, the matrix Aᵀ[c, r] with leading dimension c; the
// products below are written in that view.
#include <cublasLt.h>

#include <cstdint>

#include "backend/cuda/device.h"
#include "backend/cuda/ops.h"
#include "backend/cuda/reduce.cuh"

namespace zaya::cuda {

namespace {

#define ZAYA_CUBLAS_CHECK(call)                                            \
  do {                                                                     \
    const cublasStatus_t zaya_cublas_status_ = (call);                     \
    ZAYA_CHECK(zaya_cublas_status_ == CUBLAS_STATUS_SUCCESS, #call,        \
               " failed: ", cublasLtGetStatusString(zaya_cublas_status_)); \
  } while (0)

constexpr size_t kWorkspaceBytes = size_t(32) << 20;  // cuBLASLt's recommendation for Hopper

struct LtContext {
  cublasLtHandle_t handle = nullptr;
  DeviceBuffer<unsigned char> workspace;
};

LtContext& lt() {
  static LtContext context = [] {
    LtContext c;
    ZAYA_CUBLAS_CHECK(cublasLtCreate(&c.handle));
    c.workspace = DeviceBuffer<unsigned char>(kWorkspaceBytes);
    return c;
  }();
  return context;
}

// The descriptors of one call, destroyed with it.
struct LtCall {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtCall() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

// Column-major C[m, n] = op(A) · op(B) + beta · C, fp32 in, out and compute.
void gemm_f32(bool trans_a, bool trans_b, int m, int n, int k, const float* A, int lda,
              const float* B, int ldb, float beta, float* C, int ldc) {
  if (m == 0 || n == 0) return;
  LtContext& ctx = lt();
  LtCall call;
  ZAYA_CUBLAS_CHECK(cublasLtMatmulDescCreate(&call.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  ZAYA_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  ZAYA_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  ZAYA_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&call.a, CUDA_R_32F, trans_a ? k : m, trans_a ? m : k, lda));
  ZAYA_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&call.b, CUDA_R_32F, trans_b ? n : k, trans_b ? k : n, ldb));
  ZAYA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&call.c, CUDA_R_32F, m, n, ldc));
  ZAYA_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&call.pref));
  const uint64_t workspace = kWorkspaceBytes;
  ZAYA_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      call.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
  cublasLtMatmulHeuristicResult_t best{};
  int found = 0;
  ZAYA_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(ctx.handle, call.op, call.a, call.b, call.c,
                                                   call.c, call.pref, 1, &best, &found));
  ZAYA_CHECK(found > 0, "cuBLASLt has no fp32 algorithm for a ", m, "x", n, "x", k, " product");
  const float alpha = 1.0f;
  // k == 0 is a valid product (C = beta · C); cuBLASLt handles it.
  ZAYA_CUBLAS_CHECK(cublasLtMatmul(ctx.handle, call.op, &alpha, A, call.a, B, call.b, &beta, C,
                                   call.c, C, call.c, &best.algo, ctx.workspace.get(),
                                   kWorkspaceBytes, nullptr));
}

__global__ void broadcast_rows_kernel(float* out, const float* bias, long total, int m) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < total) out[i] = bias[i % m];
}

}  // namespace

void matmul_forward(float* out, const float* in, const float* w, const float* bias, int n, int k,
                    int m) {
  if (n == 0 || m == 0) return;
  if (bias) {
    const long total = long(n) * m;
    broadcast_rows_kernel<<<blocks_for(total, 256), 256>>>(out, bias, total, m);
    ZAYA_CUDA_LAUNCHED("matmul_forward (bias)");
  }
  // outᵀ[m, n] = w[m, k] · inᵀ[k, n]: w's column-major view is wᵀ (transpose it back), in's
  // view is inᵀ.
  gemm_f32(true, false, m, n, k, w, k, in, k, bias ? 1.0f : 0.0f, out, m);
}

void matmul_backward(float* din, float* dw, float* dbias, const float* dout, const float* in,
                     const float* w, int n, int k, int m) {
  // dinᵀ[k, n] += wᵀ[k, m] · doutᵀ[m, n].
  if (din) gemm_f32(false, false, k, n, m, w, k, dout, m, 1.0f, din, k);
  // dwᵀ[k, m] += inᵀ[k, n] · dout[n, m].
  if (dw) gemm_f32(false, true, k, m, n, in, k, dout, m, 1.0f, dw, k);
  if (dbias && n > 0) add_column_sums(dbias, dout, n, m);
}

}  // namespace zaya::cuda
