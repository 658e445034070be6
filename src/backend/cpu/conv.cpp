#include "backend/cpu/conv.h"
#include <cstddef>

#include <vector>

#include "backend/cpu/matmul.h"

namespace zaya::cpu {

void depthwise_conv_forward(float* a, const float* u, const float* w, const float* bias, int batch,
                            int seq, int channels) {
  const int C = channels;
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < batch; ++b) {
    for (int j = 0; j <= seq; ++j) {
      const float* u2 = j >= 2 ? u + (size_t(b) * seq + j - 2) * C : nullptr;  // ũ[j-2]
      const float* u1 = j >= 1 ? u + (size_t(b) * seq + j - 1) * C : nullptr;  // ũ[j-1]
      float* out = a + (size_t(b) * (seq + 1) + j) * C;
      for (int c = 0; c < C; ++c) {
        float v = bias[c];
        if (u2) v += w[2 * c] * u2[c];
        if (u1) v += w[2 * c + 1] * u1[c];
        out[c] = v;
      }
    }
  }
}

void depthwise_conv_backward(float* du, float* dw, float* dbias, const float* da, const float* u,
                             const float* w, int batch, int seq, int channels) {
  const int C = channels;
  if (du) {
    // u[t] feeds a[t+2] through tap 0 and a[t+1] through tap 1 (both j ≤ seq always hold).
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < batch; ++b) {
      for (int t = 0; t < seq; ++t) {
        const float* d1 = da + (size_t(b) * (seq + 1) + t + 1) * C;
        const float* d2 = t + 2 <= seq ? da + (size_t(b) * (seq + 1) + t + 2) * C : nullptr;
        float* g = du + (size_t(b) * seq + t) * C;
        for (int c = 0; c < C; ++c) g[c] += w[2 * c + 1] * d1[c] + (d2 ? w[2 * c] * d2[c] : 0.0f);
      }
    }
  }
  if (dw || dbias) {
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; ++c) {
      double s0 = 0.0, s1 = 0.0, sb = 0.0;
      for (int b = 0; b < batch; ++b) {
        for (int j = 0; j <= seq; ++j) {
          const double g = da[(size_t(b) * (seq + 1) + j) * C + c];
          sb += g;
          if (j >= 2) s0 += g * u[(size_t(b) * seq + j - 2) * C + c];
          if (j >= 1) s1 += g * u[(size_t(b) * seq + j - 1) * C + c];
        }
      }
      if (dw) {
        dw[2 * c] += float(s0);
        dw[2 * c + 1] += float(s1);
      }
      if (dbias) dbias[c] += float(sb);
    }
  }
}

// Splits w[C, G, 2] into two tap matrices W_k[C, G] so each group is a pair of GEMMs.
static void split_taps(std::vector<float>& w0, std::vector<float>& w1, const float* w, int C,
                       int G) {
  w0.resize(size_t(C) * G);
  w1.resize(size_t(C) * G);
  for (size_t i = 0; i < size_t(C) * G; ++i) {
    w0[i] = w[2 * i];
    w1[i] = w[2 * i + 1];
  }
}

void grouped_conv_forward(float* z, const float* a, const float* w, const float* bias, int batch,
                          int seq, int channels, int group_size) {
  const int C = channels, G = group_size, groups = C / G;
  std::vector<float> w0, w1;
  split_taps(w0, w1, w, C, G);
  for (int b = 0; b < batch; ++b) {
    const float* a0 = a + size_t(b) * (seq + 1) * C;  // rows a[t], t = 0..seq-1
    const float* a1 = a0 + C;                         // rows a[t+1]
    float* zb = z + size_t(b) * seq * C;
    for (int g = 0; g < groups; ++g) {
      const size_t off = size_t(g) * G;
      // z[:, group] = A0[:, group] · W0[group]ᵀ + A1[:, group] · W1[group]ᵀ
      gemm(false, true, seq, G, G, 1.0f, a0 + off, C, w0.data() + off * G, G, 0.0f, zb + off, C);
      gemm(false, true, seq, G, G, 1.0f, a1 + off, C, w1.data() + off * G, G, 1.0f, zb + off, C);
    }
#pragma omp parallel for schedule(static)
    for (int t = 0; t < seq; ++t)
      for (int c = 0; c < C; ++c) zb[size_t(t) * C + c] += bias[c];
  }
}

void grouped_conv_backward(float* da, float* dw, float* dbias, const float* dz, const float* a,
                           const float* w, int batch, int seq, int channels, int group_size) {
  const int C = channels, G = group_size, groups = C / G;
  std::vector<float> w0, w1, dw0, dw1;
  if (da) split_taps(w0, w1, w, C, G);
  if (dw) {
    dw0.assign(size_t(C) * G, 0.0f);
    dw1.assign(size_t(C) * G, 0.0f);
  }
  for (int b = 0; b < batch; ++b) {
    const float* a0 = a + size_t(b) * (seq + 1) * C;
    const float* a1 = a0 + C;
    float* da0 = da ? da + size_t(b) * (seq + 1) * C : nullptr;
    const float* dzb = dz + size_t(b) * seq * C;
    for (int g = 0; g < groups; ++g) {
      const size_t off = size_t(g) * G;
      if (da) {
        gemm(false, false, seq, G, G, 1.0f, dzb + off, C, w0.data() + off * G, G, 1.0f, da0 + off,
             C);
        gemm(false, false, seq, G, G, 1.0f, dzb + off, C, w1.data() + off * G, G, 1.0f,
             da0 + C + off, C);
      }
      if (dw) {
        gemm(true, false, G, G, seq, 1.0f, dzb + off, C, a0 + off, C, 1.0f, dw0.data() + off * G,
             G);
        gemm(true, false, G, G, seq, 1.0f, dzb + off, C, a1 + off, C, 1.0f, dw1.data() + off * G,
             G);
      }
    }
  }
  if (dw) {
    for (size_t i = 0; i < size_t(C) * G; ++i) {
      dw[2 * i] += dw0[i];
      dw[2 * i + 1] += dw1[i];
    }
  }
  if (dbias) {
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; ++c) {
      double s = 0.0;
      for (size_t r = 0; r < size_t(batch) * seq; ++r) s += dz[r * C + c];
      dbias[c] += float(s);
    }
  }
}

}  // namespace zaya::cpu
