// Normalisations: RMSNorm (every stage input, the router latent, the final norm) and the per-head
// L2 normalisation of CCA's queries and keys.
#pragma once

#include "backend/cpu/cpu_path_target.h"

namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

// y = x · rsqrt(mean(x²) + eps) · w   over the last dimension c; saves rstd[n] for backward.
void rmsnorm_forward(float* out, float* rstd, const float* in, const float* w, int n, int c,
                     float eps);
void rmsnorm_backward(float* din, float* dw, const float* dout, const float* in, const float* w,
                      const float* rstd, int n, int c);

// CCA's query/key normalisation, per row and head of in[n, heads, d]:
//   y = s_h · x / ‖x‖₂,   s_h = sqrt(d) · (temp ? temp[h] : 1)
// The plain norm, no epsilon (as Zyphra's reference). Saves inv_norm[n, heads] for backward.
void l2norm_forward(float* out, float* inv_norm, const float* in, const float* temp, int n,
                    int heads, int d);
// dx = s_h (dy − x̂ (x̂·dy)) / ‖x‖;   dtemp[h] += sqrt(d) Σ dy·x̂.
void l2norm_backward(float* din, float* dtemp, const float* dout, const float* in,
                     const float* temp, const float* inv_norm, int n, int heads, int d);

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
