// CCA's two causal convolutions (cpu::depthwise_conv_*, cpu::grouped_conv_*): direct kernels, one
// thread per output element; the weight gradients sum over their rows by column_sums
// (reduce.cuh: fp64, a fixed tree), so every sum has one order.
#include "backend/cuda/ops.h"
#include "backend/cuda/reduce.cuh"

namespace zaya::cuda {

namespace {

__global__ void depthwise_forward_kernel(float* a, const float* u, const float* w,
                                         const float* bias, long total, int seq, int C) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;  // over [batch, seq + 1, C]
  if (i >= total) return;
  const int c = int(i % C);
  const int j = int((i / C) % (seq + 1));
  const long b = i / (long(C) * (seq + 1));
  float v = bias[c];
  if (j >= 2) v += w[2 * c] * u[(size_t(b) * seq + j - 2) * C + c];
  if (j >= 1) v += w[2 * c + 1] * u[(size_t(b) * seq + j - 1) * C + c];
  a[i] = v;
}

__global__ void depthwise_backward_input_kernel(float* du, const float* da, const float* w,
                                                long total, int seq, int C) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;  // over [batch, seq, C]
  if (i >= total) return;
  const int c = int(i % C);
  const int t = int((i / C) % seq);
  const long b = i / (long(C) * seq);
  const float d1 = da[(size_t(b) * (seq + 1) + t + 1) * C + c];
  const float d2 = t + 2 <= seq ? da[(size_t(b) * (seq + 1) + t + 2) * C + c] : 0.0f;
  du[i] += w[2 * c + 1] * d1 + (t + 2 <= seq ? w[2 * c] * d2 : 0.0f);
}

__global__ void depthwise_backward_weight_kernel(float* dw, float* dbias, const float* da,
                                                 const float* u, int batch, int seq, int C) {
  const long c = tile_column();
  double sums[3];  // tap 0, tap 1, bias
  const long rows = long(batch) * (seq + 1);
  if (!column_sums(sums, rows, c < C, [&](long row, auto& acc) {
        const long b = row / (seq + 1);
        const int j = int(row % (seq + 1));
        const double g = da[size_t(row) * C + c];
        acc[2] += g;
        if (j >= 2) acc[0] += g * u[(size_t(b) * seq + j - 2) * C + c];
        if (j >= 1) acc[1] += g * u[(size_t(b) * seq + j - 1) * C + c];
      }))
    return;
  const double s0 = sums[0], s1 = sums[1], sb = sums[2];
  if (dw) {
    dw[2 * c] += float(s0);
    dw[2 * c + 1] += float(s1);
  }
  if (dbias) dbias[c] += float(sb);
}

// z[b, t, c] = Σ_{c' < G} w[c, c', 0]·a[t, g0 + c'] + w[c, c', 1]·a[t + 1, g0 + c'] + bias[c].
__global__ void grouped_forward_kernel(float* z, const float* a, const float* w, const float* bias,
                                       long total, int seq, int C, int G) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;  // over [batch, seq, C]
  if (i >= total) return;
  const int c = int(i % C);
  const int t = int((i / C) % seq);
  const long b = i / (long(C) * seq);
  const int g0 = (c / G) * G;
  const float* a0 = a + (size_t(b) * (seq + 1) + t) * C + g0;
  const float* a1 = a0 + C;
  float v = 0.0f;
  for (int k = 0; k < G; ++k)
    v += w[(size_t(c) * G + k) * 2] * a0[k] + w[(size_t(c) * G + k) * 2 + 1] * a1[k];
  z[i] = v + bias[c];
}

// da[b, t, c'] += Σ_{c in group} dz[b, t, c]·w[c, c', 0] + dz[b, t − 1, c]·w[c, c', 1].
__global__ void grouped_backward_input_kernel(float* da, const float* dz, const float* w,
                                              long total, int seq, int C, int G) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;  // over [batch, seq + 1, C]
  if (i >= total) return;
  const int cp = int(i % C);
  const int t = int((i / C) % (seq + 1));
  const long b = i / (long(C) * (seq + 1));
  const int g0 = (cp / G) * G, k = cp - g0;
  float v = 0.0f;
  for (int c = g0; c < g0 + G; ++c) {
    if (t < seq) v += dz[(size_t(b) * seq + t) * C + c] * w[(size_t(c) * G + k) * 2];
    if (t >= 1) v += dz[(size_t(b) * seq + t - 1) * C + c] * w[(size_t(c) * G + k) * 2 + 1];
  }
  da[i] += v;
}

// dw[c, c', tap] += Σ_{b, t} dz[b, t, c]·a[b, t + tap, g0 + c']: the weights [C, G, 2] are the
// columns of column_sums (reduce.cuh), the (b, t) its rows.
__global__ void grouped_backward_weight_kernel(float* dw, const float* dz, const float* a,
                                               int batch, int seq, int C, int G) {
  const long i = tile_column();  // over [C, G, 2]
  const int tap = int(i % 2), k = int((i / 2) % G), c = int(i / (2 * G));
  const int cp = (c / G) * G + k;
  double s[1];
  if (column_sums(s, long(batch) * seq, i < long(C) * G * 2, [&](long row, auto& acc) {
        const long b = row / seq, t = row % seq;
        acc[0] += double(dz[size_t(row) * C + c]) * a[(size_t(b) * (seq + 1) + t + tap) * C + cp];
      }))
    dw[i] += float(s[0]);
}

}  // namespace

void depthwise_conv_forward(float* a, const float* u, const float* w, const float* bias, int batch,
                            int seq, int channels) {
  const long total = long(batch) * (seq + 1) * channels;
  if (total == 0) return;
  ZAYA_LAUNCH(depthwise_forward_kernel, blocks_for(total, 256), 256, 0, 0)
  (a, u, w, bias, total, seq, channels);
  ZAYA_CUDA_LAUNCHED("depthwise_conv_forward");
}

void depthwise_conv_backward(float* du, float* dw, float* dbias, const float* da, const float* u,
                             const float* w, int batch, int seq, int channels) {
  const long total = long(batch) * seq * channels;
  if (du && total > 0) {
    ZAYA_LAUNCH(depthwise_backward_input_kernel, blocks_for(total, 256), 256, 0, 0)
    (du, da, w, total, seq, channels);
    ZAYA_CUDA_LAUNCHED("depthwise_conv_backward (input)");
  }
  if ((dw || dbias) && channels > 0) {
    ZAYA_LAUNCH(depthwise_backward_weight_kernel, blocks_for(channels, kColumnTile), kColumnThreads,
                0, 0)
    (dw, dbias, da, u, batch, seq, channels);
    ZAYA_CUDA_LAUNCHED("depthwise_conv_backward (weight)");
  }
}

void grouped_conv_forward(float* z, const float* a, const float* w, const float* bias, int batch,
                          int seq, int channels, int group_size) {
  const long total = long(batch) * seq * channels;
  if (total == 0) return;
  ZAYA_LAUNCH(grouped_forward_kernel, blocks_for(total, 256), 256, 0, 0)
  (z, a, w, bias, total, seq, channels, group_size);
  ZAYA_CUDA_LAUNCHED("grouped_conv_forward");
}

void grouped_conv_backward(float* da, float* dw, float* dbias, const float* dz, const float* a,
                           const float* w, int batch, int seq, int channels, int group_size) {
  if (long(batch) * seq * channels == 0) return;  // no launch of an empty grid
  if (da) {
    const long total = long(batch) * (seq + 1) * channels;
    ZAYA_LAUNCH(grouped_backward_input_kernel, blocks_for(total, 256), 256, 0, 0)
    (da, dz, w, total, seq, channels, group_size);
    ZAYA_CUDA_LAUNCHED("grouped_conv_backward (input)");
  }
  if (dw) {
    const long weights = long(channels) * group_size * 2;
    ZAYA_LAUNCH(grouped_backward_weight_kernel, blocks_for(weights, kColumnTile), kColumnThreads, 0,
                0)
    (dw, dz, a, batch, seq, channels, group_size);
    ZAYA_CUDA_LAUNCHED("grouped_conv_backward (weight)");
  }
  if (dbias) add_column_sums(dbias, dz, long(batch) * seq, channels);
}

}  // namespace zaya::cuda
