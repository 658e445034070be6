#include "backend/cpu/conv.h"
#include <cstddef>

#include <algorithm>
#include <vector>

#include "backend/cpu/matmul.h"

ZAYA_CPU_TARGET_BEGIN
namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

namespace {
// Columns whose float64 sums advance together in the parameter-gradient reductions.
constexpr int kCols = 16;
}  // namespace

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
    // Column blocks walked row by row (contiguous loads); each column's sums keep the order
    // b, then j, whatever the block width or thread count.
    const int blocks = (C + kCols - 1) / kCols;
#pragma omp parallel for schedule(static)
    for (int cb = 0; cb < blocks; ++cb) {
      const int c0 = cb * kCols, width = std::min(kCols, C - c0);
      double s0[kCols] = {}, s1[kCols] = {}, sb[kCols] = {};
      for (int b = 0; b < batch; ++b) {
        for (int j = 0; j <= seq; ++j) {
          const float* g = da + (size_t(b) * (seq + 1) + j) * C + c0;
          const float* u2 = j >= 2 ? u + (size_t(b) * seq + j - 2) * C + c0 : nullptr;
          const float* u1 = j >= 1 ? u + (size_t(b) * seq + j - 1) * C + c0 : nullptr;
          for (int c = 0; c < width; ++c) sb[c] += double(g[c]);
          if (u2)
            for (int c = 0; c < width; ++c) s0[c] += double(g[c]) * u2[c];
          if (u1)
            for (int c = 0; c < width; ++c) s1[c] += double(g[c]) * u1[c];
        }
      }
      for (int c = 0; c < width; ++c) {
        if (dw) {
          dw[2 * (c0 + c)] += float(s0[c]);
          dw[2 * (c0 + c) + 1] += float(s1[c]);
        }
        if (dbias) dbias[c0 + c] += float(sb[c]);
      }
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
  // One (sequence, group) product per task; gemm runs each on its calling thread, cut into the
  // same tiles as alone, so the bits do not depend on the thread count.
#pragma omp parallel for schedule(dynamic, 1)
  for (int task = 0; task < batch * groups; ++task) {
    const int b = task / groups, g = task % groups;
    const size_t off = size_t(g) * G;
    const float* a0 = a + size_t(b) * (seq + 1) * C + off;  // rows a[t], t = 0..seq-1
    const float* a1 = a0 + C;                               // rows a[t+1]
    float* zb = z + size_t(b) * seq * C + off;
    // z[:, group] = A0[:, group] · W0[group]ᵀ + A1[:, group] · W1[group]ᵀ, then the bias
    gemm(false, true, seq, G, G, 1.0f, a0, C, w0.data() + off * G, G, 0.0f, zb, C);
    gemm(false, true, seq, G, G, 1.0f, a1, C, w1.data() + off * G, G, 1.0f, zb, C);
    for (int t = 0; t < seq; ++t)
      for (int c = 0; c < G; ++c) zb[size_t(t) * C + c] += bias[off + c];
  }
}

void grouped_conv_backward(float* da, float* dw, float* dbias, const float* dz, const float* a,
                           const float* w, int batch, int seq, int channels, int group_size) {
  const int C = channels, G = group_size, groups = C / G;
  if (da) {
    std::vector<float> w0, w1;
    split_taps(w0, w1, w, C, G);
    // Tasks (sequence, group) write disjoint blocks of da; within one, the two products in order.
#pragma omp parallel for schedule(dynamic, 1)
    for (int task = 0; task < batch * groups; ++task) {
      const int b = task / groups, g = task % groups;
      const size_t off = size_t(g) * G;
      const float* dzb = dz + size_t(b) * seq * C + off;
      float* da0 = da + size_t(b) * (seq + 1) * C + off;
      gemm(false, false, seq, G, G, 1.0f, dzb, C, w0.data() + off * G, G, 1.0f, da0, C);
      gemm(false, false, seq, G, G, 1.0f, dzb, C, w1.data() + off * G, G, 1.0f, da0 + C, C);
    }
  }
  if (dw) {
    // One task per group, accumulating its sequences in order.
    std::vector<float> dw0(size_t(C) * G, 0.0f), dw1(size_t(C) * G, 0.0f);
#pragma omp parallel for schedule(dynamic, 1)
    for (int g = 0; g < groups; ++g) {
      const size_t off = size_t(g) * G;
      for (int b = 0; b < batch; ++b) {
        const float* a0 = a + size_t(b) * (seq + 1) * C + off;
        const float* dzb = dz + size_t(b) * seq * C + off;
        gemm(true, false, G, G, seq, 1.0f, dzb, C, a0, C, 1.0f, dw0.data() + off * G, G);
        gemm(true, false, G, G, seq, 1.0f, dzb, C, a0 + C, C, 1.0f, dw1.data() + off * G, G);
      }
    }
    for (size_t i = 0; i < size_t(C) * G; ++i) {
      dw[2 * i] += dw0[i];
      dw[2 * i + 1] += dw1[i];
    }
  }
  if (dbias) {
    // Column blocks walked row by row; each column's sum in row order.
    const int blocks = (C + kCols - 1) / kCols;
    const size_t rows = size_t(batch) * seq;
#pragma omp parallel for schedule(static)
    for (int cb = 0; cb < blocks; ++cb) {
      const int c0 = cb * kCols, width = std::min(kCols, C - c0);
      double s[kCols] = {};
      for (size_t r = 0; r < rows; ++r)
        for (int c = 0; c < width; ++c) s[c] += double(dz[r * C + c0 + c]);
      for (int c = 0; c < width; ++c) dbias[c0 + c] += float(s[c]);
    }
  }
}

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
ZAYA_CPU_TARGET_END
