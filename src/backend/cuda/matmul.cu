// Matrix products through cuBLASLt, the one GEMM entry of the GPU backend. The fp32 path computes
// in fp32 (CUBLAS_COMPUTE_32F: no TF32), so it can be held to the CPU at 1e-5. cuBLAS gives the
// same bits on every run on GPUs of one architecture and SM count (its reproducibility
// guarantee), which keeps GPU training bitwise repeatable.
//
// Row-major A[r, c] is, to column-major cuBLAS, the matrix Aᵀ[c, r] with leading dimension c; the
// products below are written in that view.
#include <cublasLt.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "backend/cuda/device.h"
#include "backend/cuda/events.cuh"
#include "backend/cuda/ops.h"
#include "backend/cuda/reduce.cuh"
#include "backend/cuda/timing.h"

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

// The descriptors and chosen algorithm of one product shape, made once and kept: the heuristic
// query costs tens of microseconds, more than a small product itself.
struct LtPlan {
  LtCall call;
  cublasLtMatmulAlgo_t algo{};
};

using PlanKey = std::array<int, 9>;  // data type, trans_a, trans_b, m, n, k, lda, ldb, ldc

const LtPlan& plan_for(cudaDataType_t data, bool trans_a, bool trans_b, int m, int n, int k,
                       int lda, int ldb, int ldc) {
  static std::map<PlanKey, std::unique_ptr<LtPlan>> plans;
  static std::mutex mutex;
  const PlanKey key{int(data), trans_a, trans_b, m, n, k, lda, ldb, ldc};
  const std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<LtPlan>& slot = plans[key];
  if (slot) return *slot;
  auto plan = std::make_unique<LtPlan>();
  LtCall& call = plan->call;
  ZAYA_CUBLAS_CHECK(cublasLtMatmulDescCreate(&call.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  ZAYA_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  ZAYA_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(call.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  ZAYA_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&call.a, data, trans_a ? k : m, trans_a ? m : k, lda));
  ZAYA_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&call.b, data, trans_b ? n : k, trans_b ? k : n, ldb));
  ZAYA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&call.c, data, m, n, ldc));
  ZAYA_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&call.pref));
  const uint64_t workspace = kWorkspaceBytes;
  ZAYA_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      call.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
  cublasLtMatmulHeuristicResult_t best{};
  int found = 0;
  ZAYA_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt().handle, call.op, call.a, call.b, call.c,
                                                   call.c, call.pref, 1, &best, &found));
  ZAYA_CHECK(found > 0, "cuBLASLt has no ", data == CUDA_R_16BF ? "bf16" : "fp32",
             " algorithm for a ", m, "x", n, "x", k, " product");
  plan->algo = best.algo;
  slot = std::move(plan);
  return *slot;
}

// Column-major C[m, n] = op(A) · op(B) + beta · C with fp32 accumulation: A, B and C of type
// `data` (fp32, or bf16 for the timings), computed in fp32 (CUBLAS_COMPUTE_32F: no TF32).
void gemm(cudaDataType_t data, bool trans_a, bool trans_b, int m, int n, int k, const void* A,
          int lda, const void* B, int ldb, float beta, void* C, int ldc) {
  if (m == 0 || n == 0) return;
  LtContext& ctx = lt();
  const LtPlan& plan = plan_for(data, trans_a, trans_b, m, n, k, lda, ldb, ldc);
  const float alpha = 1.0f;
  // k == 0 is a valid product (C = beta · C); cuBLASLt handles it.
  ZAYA_CUBLAS_CHECK(cublasLtMatmul(ctx.handle, plan.call.op, &alpha, A, plan.call.a, B, plan.call.b,
                                   &beta, C, plan.call.c, C, plan.call.c, &plan.algo,
                                   ctx.workspace.get(), kWorkspaceBytes, nullptr));
}

void gemm_f32(bool trans_a, bool trans_b, int m, int n, int k, const float* A, int lda,
              const float* B, int ldb, float beta, float* C, int ldc) {
  gemm(CUDA_R_32F, trans_a, trans_b, m, n, k, A, lda, B, ldb, beta, C, ldc);
}

// Values in [-0.5, 0.5) from a hash of the index, as fp32 or as bf16 (its upper 16 bits): data
// for the timings that is neither zero nor the same everywhere.
__global__ void fill_hashed_kernel(void* out, long n, bool bf16) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const unsigned h = unsigned(i) * 2654435761u;
  const float v = float(h >> 8) * (1.0f / 16777216.0f) - 0.5f;
  if (bf16)
    static_cast<unsigned short*>(out)[i] = static_cast<unsigned short>(__float_as_uint(v) >> 16);
  else
    static_cast<float*>(out)[i] = v;
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

double time_gemm(int m, int n, int k, bool trans_a, bool trans_b, bool bf16, int reps) {
  ZAYA_CHECK(m > 0 && n > 0 && k > 0 && reps > 0, "time_gemm: ", m, "x", n, "x", k, ", reps ",
             reps);
  const size_t elem = bf16 ? 2 : 4;
  DeviceBuffer<unsigned char> a(size_t(m) * k * elem), b(size_t(k) * n * elem),
      c(size_t(m) * n * elem);
  for (auto* buf : {&a, &b, &c}) {
    const long count = long(buf->size() / elem);
    fill_hashed_kernel<<<blocks_for(count, 256), 256>>>(buf->get(), count, bf16);
    ZAYA_CUDA_LAUNCHED("fill_hashed_kernel");
  }
  const cudaDataType_t data = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  // Row-major C[m, n] = op(A) · op(B) is column-major Cᵀ[n, m] = op(B)ᵀ · op(A)ᵀ; a row-major
  // operand's storage is its transpose to cuBLAS, so the flags carry over unchanged.
  const auto product = [&] {
    gemm(data, trans_b, trans_a, n, m, k, b.get(), trans_b ? k : n, a.get(), trans_a ? m : k, 0.0f,
         c.get(), n);
  };
  product();  // warm-up: the handle, the workspace and the algorithm's first launch
  EventPair events;
  ZAYA_CUDA_CHECK(cudaEventRecord(events.start));
  for (int r = 0; r < reps; ++r) product();
  ZAYA_CUDA_CHECK(cudaEventRecord(events.stop));
  return events.seconds() / reps;
}

}  // namespace zaya::cuda
