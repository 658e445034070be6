#include "backend/cuda_emu/emu_gemm.h"

#include <cblas.h>

#include <cstring>
#include <vector>

#include "backend/cpu/single_threaded_blas.h"
#include "backend/cuda_emu/device_memory.h"
#include "backend/cuda_emu/emu_cuda.h"
#include "core/error.h"

namespace zaya::emu {

namespace {

// bf16 ⇄ fp32 as the emulated device's kernels convert (emu_cuda.h).
float widen(uint16_t h) {
  return __bfloat162float(__nv_bfloat16{h});
}

uint16_t round_to_bf16(float f) {
  return __float2bfloat16_rn(f).bits;
}

// Elements a column-major matrix of `rows` × `cols` with leading dimension ld spans.
size_t span_of(int rows, int cols, int ld) {
  return rows == 0 || cols == 0 ? 0 : size_t(ld) * size_t(cols - 1) + size_t(rows);
}

// The matrix as fp32: itself, or its bf16 values widened into `scratch`.
const float* as_fp32(const void* p, bool bf16, size_t n, std::vector<float>& scratch) {
  if (!bf16) return static_cast<const float*>(p);
  scratch.resize(n);
  const auto* h = static_cast<const uint16_t*>(p);
  for (size_t i = 0; i < n; ++i) scratch[i] = widen(h[i]);
  return scratch.data();
}

}  // namespace

void gemm_column_major(const GemmCall& g) {
  if (g.m == 0 || g.n == 0) return;
  const size_t in_elem = g.bf16_inputs ? 2 : 4, out_elem = g.bf16_output ? 2 : 4;
  const size_t a_span = span_of(g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda);
  const size_t b_span = span_of(g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb);
  const size_t c_span = span_of(g.m, g.n, g.ldc);
  std::vector<float> a32, b32, c32;
  // On the calling thread alone (backend/cpu/single_threaded_blas.h): a GPU's product does not
  // depend on the host's threads, and a bf16 run resumed beside a busy loop once ended with other
  // weights than the uninterrupted one when this one did.
  const cpu::SingleThreadedBlas calling_thread;
  for (int i = 0; i < g.count; ++i) {
    const char* a = static_cast<const char*>(g.a) + size_t(i) * size_t(g.stride_a) * in_elem;
    const char* b = static_cast<const char*>(g.b) + size_t(i) * size_t(g.stride_b) * in_elem;
    char* c = static_cast<char*>(g.c) + size_t(i) * size_t(g.stride_c) * out_elem;
    if (g.k > 0) {
      require_device_range(a, a_span * in_elem, "cuBLASLt (emulated): matrix A");
      require_device_range(b, b_span * in_elem, "cuBLASLt (emulated): matrix B");
    }
    require_device_range(c, c_span * out_elem, "cuBLASLt (emulated): matrix C");
    const float* af = as_fp32(a, g.bf16_inputs, a_span, a32);
    const float* bf = as_fp32(b, g.bf16_inputs, b_span, b32);
    float* cf = g.bf16_output ? const_cast<float*>(as_fp32(c, true, c_span, c32))
                              : reinterpret_cast<float*>(c);
    // beta == 0 must not read C (it may hold NaN), as cuBLAS.
    if (g.beta == 0.0f)
      for (int col = 0; col < g.n; ++col)
        std::memset(cf + size_t(col) * size_t(g.ldc), 0, sizeof(float) * size_t(g.m));
    if (g.k > 0)
      cblas_sgemm(CblasColMajor, g.trans_a ? CblasTrans : CblasNoTrans,
                  g.trans_b ? CblasTrans : CblasNoTrans, g.m, g.n, g.k, g.alpha, af, g.lda, bf,
                  g.ldb, g.beta == 0.0f ? 0.0f : g.beta, cf, g.ldc);
    else if (g.beta != 1.0f && g.beta != 0.0f)
      for (int col = 0; col < g.n; ++col)
        for (int row = 0; row < g.m; ++row) cf[size_t(col) * size_t(g.ldc) + size_t(row)] *= g.beta;
    if (g.bf16_output) {
      auto* h = reinterpret_cast<uint16_t*>(c);
      for (int col = 0; col < g.n; ++col)
        for (int row = 0; row < g.m; ++row) {
          const size_t at = size_t(col) * size_t(g.ldc) + size_t(row);
          h[at] = round_to_bf16(cf[at]);
        }
    }
  }
}

}  // namespace zaya::emu
