// The GPU ops, with the CPU backend's conventions (backend/cpu/*.h): pointers are device memory,
// row-major; `*_forward` overwrites its outputs; `*_backward` ADDS into the gradient buffers it is
// given and skips any that are nullptr. Each op computes what its cpu:: namesake computes, in
// fp32 with the same fp64 accumulations, and is held to it by tests/gpu (every reduction runs in
// a fixed order, so a GPU run is bitwise reproducible). Launches go to the default stream.
#pragma once

namespace zaya::cuda {

// RMSNorm over the last dimension c (cpu::rmsnorm_*); rstd[n] may be nullptr in the forward.
void rmsnorm_forward(float* out, float* rstd, const float* in, const float* w, int n, int c,
                     float eps);
void rmsnorm_backward(float* din, float* dw, const float* dout, const float* in, const float* w,
                      const float* rstd, int n, int c);

// SwiGLU on in[n, 2f], the gate first (cpu::swiglu_*).
void swiglu_forward(float* out, const float* in, int n, int f);
void swiglu_backward(float* din, const float* dout, const float* in, int n, int f);

// ZAYA1's residual scaling (cpu::residual_merge_*); r == nullptr at stage 0.
void residual_merge_forward(float* out, const float* h, const float* hb, const float* hs,
                            const float* r, const float* rb, const float* rs, int n, int c);
void residual_merge_backward(float* dh, float* dhb, float* dhs, float* dr, float* drb, float* drs,
                             const float* dout, const float* h, const float* hb, const float* hs,
                             const float* r, const float* rb, const float* rs, int n, int c);

// out[n, m] = in[n, k] · w[m, k]ᵀ (+ bias[m]) through cuBLASLt in fp32 (no TF32), and its
// backward (cpu::matmul_*).
void matmul_forward(float* out, const float* in, const float* w, const float* bias, int n, int k,
                    int m);
void matmul_backward(float* din, float* dw, float* dbias, const float* dout, const float* in,
                     const float* w, int n, int k, int m);

}  // namespace zaya::cuda
