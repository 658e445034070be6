// ZAYA1's residual scaling: at the start of every stage the two streams, the previous branch output
// h and the residual r, are merged with learned per-channel affines:
//   out = (h + hb) ⊙ hs + (r + rb) ⊙ rs          (the r term is absent at stage 0)
#pragma once

#include "backend/cpu/cpu_path_target.h"

namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

void residual_merge_forward(float* out, const float* h, const float* hb, const float* hs,
                            const float* r, const float* rb, const float* rs, int n, int c);
// dh += dout ⊙ hs, dr += dout ⊙ rs; dhs += Σ dout ⊙ (h + hb); dhb += Σ dout ⊙ hs; same for r.
void residual_merge_backward(float* dh, float* dhb, float* dhs, float* dr, float* drb, float* drs,
                             const float* dout, const float* h, const float* hb, const float* hs,
                             const float* r, const float* rb, const float* rs, int n, int c);
// The merge and then the RMSNorm of its output (cpu::rmsnorm_forward with weight w): every
// stage's start and the model's end. One op so that a GPU reads each row once (the CPU runs
// the two in turn).
void merge_rmsnorm_forward(float* r_out, float* x_out, float* rstd, const float* h, const float* hb,
                           const float* hs, const float* r, const float* rb, const float* rs,
                           const float* w, int n, int c, float eps);

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
