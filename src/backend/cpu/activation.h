// Pointwise activations and the row softmax.
#pragma once

#include "backend/cpu/cpu_path_target.h"

namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

// Exact (erf) GELU, PyTorch's nn.GELU() default: x · Φ(x).
void gelu_forward(float* out, const float* in, long n);
void gelu_backward(float* din, const float* dout, const float* in, long n);

// SiLU: x · σ(x).
void silu_forward(float* out, const float* in, long n);
void silu_backward(float* din, const float* dout, const float* in, long n);

// SwiGLU on in[n, 2f]: out[n, f] = silu(in[:, :f]) ⊙ in[:, f:] (the gate is the first half).
void swiglu_forward(float* out, const float* in, int n, int f);
void swiglu_backward(float* din, const float* dout, const float* in, int n, int f);

// Softmax over the last dimension c, computed in fp32 with the max subtracted.
void softmax_forward(float* out, const float* in, int n, int c);
// din += out ⊙ (dout − Σ dout·out)
void softmax_backward(float* din, const float* dout, const float* out, int n, int c);

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
