// The two causal convolutions of CCA, over the time axis of the packed q‖k latent u[batch, seq, C].
// u is left-padded with 2 zero steps (kernel 2 + kernel 2), so the second conv's output at t sees
// u[t-2], u[t-1], u[t] and nothing later.
#pragma once

#include "backend/cpu/cpu_path_target.h"

namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

// Stage A, depthwise (groups = C), kernel 2, with bias:
//   a[b, j, c] = w[c,0]·ũ[j-2] + w[c,1]·ũ[j-1] + bias[c],  j = 0..seq  (seq+1 outputs),
// where ũ[t] = u[t] for t ≥ 0 and 0 for the padding. Note a[0] = bias (both taps read padding).
void depthwise_conv_forward(float* a, const float* u, const float* w, const float* bias, int batch,
                            int seq, int channels);
void depthwise_conv_backward(float* du, float* dw, float* dbias, const float* da, const float* u,
                             const float* w, int batch, int seq, int channels);

// Stage B, grouped (groups = channels / group_size, one group per head), kernel 2, with bias:
//   z[b, t, c] = Σ_{c' in group(c)} w[c, c', 0]·a[t, c'] + w[c, c', 1]·a[t+1, c'] + bias[c],
// t = 0..seq-1; w has the PyTorch Conv1d layout [channels, group_size, 2].
void grouped_conv_forward(float* z, const float* a, const float* w, const float* bias, int batch,
                          int seq, int channels, int group_size);
void grouped_conv_backward(float* da, float* dw, float* dbias, const float* dz, const float* a,
                           const float* w, int batch, int seq, int channels, int group_size);

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
