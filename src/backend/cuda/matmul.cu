// Matrix products through cuBLASLt, the one GEMM entry of the GPU backend. The fp32 path computes
// in fp32 (CUBLAS_COMPUTE_32F: no TF32), so it can be held to the CPU at 1e-5. cuBLAS gives the
// same bits on every run on GPUs of one architecture and SM count (its reproducibility
// guarantee), which keeps GPU training bitwise repeatable.
//
// Row-major A[r, c] is, to column-major cuBLAS, the matrix Aᵀ[c, r] with leading dimension c; the
// products below are written in that view.
#if defined(ZAYA_CUDA_EMU)
#include "backend/cuda_emu/emu_gemm.h"
#else
#include <cublasLt.h>
#include <cuda_bf16.h>
#endif

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "backend/cuda/device.h"
#include "backend/cuda/events.cuh"
#include "backend/cuda/gemm.h"
#include "backend/cuda/op_profile.h"
#include "backend/cuda/ops.h"
#include "backend/cuda/reduce.cuh"
#include "backend/cuda/timing.h"

namespace zaya::cuda {

namespace {

// The product's line of the op profile (op_profile.h): types, shape and operand alignments.
std::string gemm_profile_name(bool bf16_in, bool bf16_out, bool trans_a, bool trans_b, int m, int n,
                              int k, const void* A, const void* B, const void* C, int batch) {
  auto align = [](const void* p) {
    const uintptr_t address = reinterpret_cast<uintptr_t>(p);
    int alignment = 256;
    while (alignment > 1 && address % uintptr_t(alignment) != 0) alignment /= 2;
    return std::to_string(alignment);
  };
  return std::string(bf16_in ? "bf16" : "fp32") + "->" + (bf16_out ? "bf16 " : "fp32 ") +
         (trans_a ? "T" : "N") + (trans_b ? "T" : "N") + " m" + std::to_string(m) + " n" +
         std::to_string(n) + " k" + std::to_string(k) +
         (batch > 1 ? " x" + std::to_string(batch) : "") + " align " + align(A) + "/" + align(B) +
         "/" + align(C);
}

#if !defined(ZAYA_CUDA_EMU)
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

// The descriptors and chosen algorithm of one product shape and operand alignment, made once and
// kept: the heuristic query costs tens of microseconds, more than a small product itself.
struct LtPlan {
  LtCall call;
  cublasLtMatmulAlgo_t algo{};
};

// The largest power of two up to 256 that divides the address. cuBLASLt assumes 256-byte
// aligned operands unless told otherwise, and an algorithm chosen under that assumption may fail
// or fault on the model's pointers: the experts' rows and the LM head's chunks start inside larger
// buffers, and a caller's weights may start at any float (the model's start at a multiple of 8,
// model/params.h, because an alignment under 16 bytes costs the fast kernels).
uint32_t alignment_of(const void* p) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(p);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

// The alignment every matrix of a strided batch keeps: the first one's, reduced until the stride
// (in bytes) is a multiple of it.
uint32_t batch_alignment(const void* p, int64_t stride_bytes) {
  uint32_t alignment = alignment_of(p);
  while (alignment > 1 && stride_bytes % alignment != 0) alignment /= 2;
  return alignment;
}

// The inputs' type, the output's, trans_a, trans_b, m, n, k, lda, ldb, ldc, the alignments of A, B
// and C (D is C), and the batch: its count and the three strides.
using PlanKey = std::array<int64_t, 17>;

const LtPlan& plan_for(cudaDataType_t in_type, cudaDataType_t out_type, bool trans_a, bool trans_b,
                       int m, int n, int k, int lda, int ldb, int ldc, uint32_t align_a,
                       uint32_t align_b, uint32_t align_c, const GemmBatch& batch) {
  static std::map<PlanKey, std::unique_ptr<LtPlan>> plans;
  static std::mutex mutex;
  const PlanKey key{int(in_type),
                    int(out_type),
                    trans_a,
                    trans_b,
                    m,
                    n,
                    k,
                    lda,
                    ldb,
                    ldc,
                    align_a,
                    align_b,
                    align_c,
                    batch.count,
                    batch.stride_a,
                    batch.stride_b,
                    batch.stride_c};
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
      cublasLtMatrixLayoutCreate(&call.a, in_type, trans_a ? k : m, trans_a ? m : k, lda));
  ZAYA_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&call.b, in_type, trans_b ? n : k, trans_b ? k : n, ldb));
  ZAYA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&call.c, out_type, m, n, ldc));
  if (batch.count > 1) {  // a strided batch: every layout repeats count times at its stride
    const int32_t count = batch.count;
    const std::pair<cublasLtMatrixLayout_t, int64_t> strided[] = {
        {call.a, batch.stride_a}, {call.b, batch.stride_b}, {call.c, batch.stride_c}};
    for (const auto& [layout, stride] : strided) {
      ZAYA_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                         &count, sizeof(count)));
      ZAYA_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
          layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
    }
  }
  ZAYA_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&call.pref));
  const uint64_t workspace = kWorkspaceBytes;
  ZAYA_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      call.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_c},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_c}};
  for (const auto& [attribute, bytes] : alignments)
    ZAYA_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(call.pref, attribute, &bytes, sizeof(bytes)));
  cublasLtMatmulHeuristicResult_t best{};
  int found = 0;
  ZAYA_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt().handle, call.op, call.a, call.b, call.c,
                                                   call.c, call.pref, 1, &best, &found));
  ZAYA_CHECK(found > 0, "cuBLASLt has no ", in_type == CUDA_R_16BF ? "bf16" : "fp32", " -> ",
             out_type == CUDA_R_16BF ? "bf16" : "fp32", " algorithm for a ", m, "x", n, "x", k,
             " product");
  plan->algo = best.algo;
  slot = std::move(plan);
  return *slot;
}

// Column-major C[m, n] = alpha · op(A) · op(B) + beta · C with fp32 accumulation
// (CUBLAS_COMPUTE_32F: no TF32): A and B of in_type, C of out_type (fp32 throughout, bf16 inputs
// with an fp32 output for the bf16 backend, or bf16 throughout for the timings); `batch` repeats
// it over matrices at fixed strides.
void gemm(cudaDataType_t in_type, cudaDataType_t out_type, bool trans_a, bool trans_b, int m, int n,
          int k, const void* A, int lda, const void* B, int ldb, float beta, void* C, int ldc,
          float alpha = 1.0f, const GemmBatch& batch = {}) {
  ZAYA_CHECK(batch.count >= 1, "gemm: batch of ", batch.count);
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: C = beta · C, without asking cuBLASLt about 0-wide layouts
    ZAYA_CHECK(beta == 0.0f || beta == 1.0f, "gemm: k == 0 with beta ", beta);
    if (beta == 0.0f) {
      const size_t elem = out_type == CUDA_R_16BF ? 2 : 4;
      for (int b = 0; b < batch.count; ++b)
        ZAYA_CUDA_CHECK(cudaMemset2D(static_cast<char*>(C) + size_t(b) * batch.stride_c * elem,
                                     size_t(ldc) * elem, 0, size_t(m) * elem, size_t(n)));
    }
    return;
  }
  const OpTimer timer(ProfileKind::Gemm,
                      op_profile_enabled()
                          ? gemm_profile_name(in_type == CUDA_R_16BF, out_type == CUDA_R_16BF,
                                              trans_a, trans_b, m, n, k, A, B, C, batch.count)
                          : std::string());
  LtContext& ctx = lt();
  const int64_t in_elem = in_type == CUDA_R_16BF ? 2 : 4,
                out_elem = out_type == CUDA_R_16BF ? 2 : 4;
  const LtPlan& plan = plan_for(in_type, out_type, trans_a, trans_b, m, n, k, lda, ldb, ldc,
                                batch_alignment(A, batch.stride_a * in_elem),
                                batch_alignment(B, batch.stride_b * in_elem),
                                batch_alignment(C, batch.stride_c * out_elem), batch);
  ZAYA_CUBLAS_CHECK(cublasLtMatmul(ctx.handle, plan.call.op, &alpha, A, plan.call.a, B, plan.call.b,
                                   &beta, C, plan.call.c, C, plan.call.c, &plan.algo,
                                   ctx.workspace.get(), kWorkspaceBytes, nullptr));
}

#else
// Column-major C[m, n] = alpha · op(A) · op(B) + beta · C with fp32 accumulation
// (CUBLAS_COMPUTE_32F: no TF32): A and B of in_type, C of out_type (fp32 throughout, bf16 inputs
// with an fp32 output for the bf16 backend, or bf16 throughout for the timings); `batch` repeats
// it over matrices at fixed strides.
// On the emulated device: OpenBLAS over the inputs widened to fp32 (backend/cuda_emu/emu_gemm.h).
void gemm(cudaDataType_t in_type, cudaDataType_t out_type, bool trans_a, bool trans_b, int m, int n,
          int k, const void* A, int lda, const void* B, int ldb, float beta, void* C, int ldc,
          float alpha = 1.0f, const GemmBatch& batch = {}) {
  ZAYA_CHECK(batch.count >= 1, "gemm: batch of ", batch.count);
  const OpTimer timer(ProfileKind::Gemm,
                      op_profile_enabled()
                          ? gemm_profile_name(in_type == CUDA_R_16BF, out_type == CUDA_R_16BF,
                                              trans_a, trans_b, m, n, k, A, B, C, batch.count)
                          : std::string());
  emu::gemm_column_major({in_type == CUDA_R_16BF, out_type == CUDA_R_16BF, trans_a, trans_b, m, n,
                          k, alpha, A, lda, B, ldb, beta, C, ldc, batch.count, batch.stride_a,
                          batch.stride_b, batch.stride_c});
}
#endif

// The GEMM precision of the ops running on this thread (Bf16Gemms sets it for one op).
thread_local bool t_bf16_gemms = false;

// fp32 → bf16, rounded to nearest even (the rounding of PyTorch's .to(torch.bfloat16)).
__global__ void to_bf16_kernel(__nv_bfloat16* out, const float* in, long n) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16_rn(in[i]);
}

// Device scratch for the bf16 copies of a product's two inputs, grown as needed and reused: the
// conversions and the products run in order on one stream, so one pair serves every call.
__nv_bfloat16* bf16_scratch(int which, size_t n) {
  static DeviceBuffer<__nv_bfloat16> buffers[2];
  DeviceBuffer<__nv_bfloat16>& b = buffers[which];
  return grown(b, b.size() < n ? std::max(n, b.size() * 3 / 2) : n);
}

// An input of a product: fp32 values, or bf16 ones (a weight the model hands over in bf16).
struct GemmInput {
  const void* values;
  bool bf16;
};
GemmInput input(WeightRef w) {
  if (w.is_bf16()) return {w.bf16_values(), true};
  return {w.f32(), false};
}
GemmInput input(const float* activations) {
  return {activations, false};
}

// The bf16 values of an input of n elements: a bf16 one as it is, an fp32 one rounded into the
// scratch `which`.
const __nv_bfloat16* to_bf16(int which, GemmInput in, size_t n) {
  if (in.bf16) return static_cast<const __nv_bfloat16*>(in.values);
  __nv_bfloat16* out = bf16_scratch(which, n);
  if (n) {
    ZAYA_LAUNCH(to_bf16_kernel, blocks_for(long(n), 256), 256, 0, 0)
    (out, static_cast<const float*>(in.values), long(n));
    ZAYA_CUDA_LAUNCHED("to_bf16_kernel");
  }
  return out;
}

// The products of the ops: fp32 in and out, or, under Bf16Gemms, the inputs in bf16 (weights
// and activations alike) with fp32 accumulation into the output: fp32, or a bf16 weight gradient
// (C = round(A·B + C), the sum in fp32 and one rounding).
void gemm_typed(bool trans_a, bool trans_b, int m, int n, int k, GemmInput A, int lda, GemmInput B,
                int ldb, float beta, GradRef C, int ldc) {
  if (!t_bf16_gemms) {
    ZAYA_CHECK(!A.bf16 && !B.bf16 && !C.is_bf16(),
               "the fp32 CUDA backend was given bf16 weights or gradients; its products take "
               "fp32 (the bf16 backend, --precision bf16, takes both)");
    gemm(CUDA_R_32F, CUDA_R_32F, trans_a, trans_b, m, n, k, A.values, lda, B.values, ldb, beta,
         C.f32(), ldc);
    return;
  }
  if (m == 0 || n == 0) return;
  // Column-major storage: lda × (columns of the stored A), the same for B.
  const size_t a_elems = size_t(lda) * size_t(trans_a ? m : k);
  const size_t b_elems = size_t(ldb) * size_t(trans_b ? k : n);
  const __nv_bfloat16* a16 = to_bf16(0, A, a_elems);
  const __nv_bfloat16* b16 = to_bf16(1, B, b_elems);
  if (C.is_bf16()) {
    gemm(CUDA_R_16BF, CUDA_R_16BF, trans_a, trans_b, m, n, k, a16, lda, b16, ldb, beta,
         C.bf16_values(), ldc);
    return;
  }
  gemm(CUDA_R_16BF, CUDA_R_32F, trans_a, trans_b, m, n, k, a16, lda, b16, ldb, beta, C.f32(), ldc);
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

void matmul_forward(float* out, const float* in, WeightRef w, const float* bias, int n, int k,
                    int m) {
  if (n == 0 || m == 0) return;
  if (bias) {
    const long total = long(n) * m;
    ZAYA_LAUNCH(broadcast_rows_kernel, blocks_for(total, 256), 256, 0, 0)(out, bias, total, m);
    ZAYA_CUDA_LAUNCHED("matmul_forward (bias)");
  }
  // outᵀ[m, n] = w[m, k] · inᵀ[k, n]: w's column-major view is wᵀ (transpose it back), in's
  // view is inᵀ.
  gemm_typed(true, false, m, n, k, input(w), k, input(in), k, bias ? 1.0f : 0.0f, out, m);
}

void matmul_backward(float* din, GradRef dw, float* dbias, const float* dout, const float* in,
                     WeightRef w, int n, int k, int m) {
  // dinᵀ[k, n] += wᵀ[k, m] · doutᵀ[m, n].
  if (din) gemm_typed(false, false, k, n, m, input(w), k, input(dout), m, 1.0f, din, k);
  // dwᵀ[k, m] += inᵀ[k, n] · dout[n, m].
  if (!dw.empty()) gemm_typed(false, true, k, m, n, input(in), k, input(dout), m, 1.0f, dw, k);
  if (dbias && n > 0) add_column_sums(dbias, dout, n, m);
}

void gemm_f32_batched(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* A,
                      int lda, const float* B, int ldb, float beta, float* C, int ldc,
                      const GemmBatch& batch) {
  gemm(CUDA_R_32F, CUDA_R_32F, trans_a, trans_b, m, n, k, A, lda, B, ldb, beta, C, ldc, alpha,
       batch);
}

Bf16Gemms::Bf16Gemms(bool on) : previous_(t_bf16_gemms) {
  t_bf16_gemms = on;
}

Bf16Gemms::~Bf16Gemms() {
  t_bf16_gemms = previous_;
}

double time_gemm(int m, int n, int k, bool trans_a, bool trans_b, bool bf16, int reps) {
  ZAYA_CHECK(m > 0 && n > 0 && k > 0 && reps > 0, "time_gemm: ", m, "x", n, "x", k, ", reps ",
             reps);
  const size_t elem = bf16 ? 2 : 4;
  DeviceBuffer<unsigned char> a(size_t(m) * k * elem), b(size_t(k) * n * elem),
      c(size_t(m) * n * elem);
  for (auto* buf : {&a, &b, &c}) {
    const long count = long(buf->size() / elem);
    ZAYA_LAUNCH(fill_hashed_kernel, blocks_for(count, 256), 256, 0, 0)(buf->get(), count, bf16);
    ZAYA_CUDA_LAUNCHED("fill_hashed_kernel");
  }
  const cudaDataType_t data = bf16 ? CUDA_R_16BF : CUDA_R_32F;  // inputs and output alike
  // Row-major C[m, n] = op(A) · op(B) is column-major Cᵀ[n, m] = op(B)ᵀ · op(A)ᵀ; a row-major
  // operand's storage is its transpose to cuBLAS, so the flags carry over unchanged.
  const auto product = [&] {
    gemm(data, data, trans_b, trans_a, n, m, k, b.get(), trans_b ? k : n, a.get(), trans_a ? m : k,
         0.0f, c.get(), n);
  };
  product();  // warm-up: the handle, the workspace and the algorithm's first launch
  EventPair events;
  ZAYA_CUDA_CHECK(cudaEventRecord(events.start));
  for (int r = 0; r < reps; ++r) product();
  ZAYA_CUDA_CHECK(cudaEventRecord(events.stop));
  return events.seconds() / reps;
}

}  // namespace zaya::cuda
