#include "backend/cpu/activation.h"

#include <cstddef>
#include "backend/cpu/fast_exp.h"
#include "backend/cpu/parallel_threshold.h"

#include <cmath>

ZAYA_CPU_TARGET_BEGIN
namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

namespace {
constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
// An element of these ops is a libm call (exp, erf: about 4 ns, the cost of a dozen plain
// elements), which the threshold of elementwise work (worth_threads) counts as this many.
constexpr int64_t kLibmElement = 8;

inline float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}
}  // namespace

void gelu_forward(float* out, const float* in, long n) {
  for_ranges(n, worth_threads(n * kLibmElement), [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i)
      out[i] = 0.5f * in[i] * (1.0f + std::erf(in[i] * kInvSqrt2));
  });
}

void gelu_backward(float* din, const float* dout, const float* in, long n) {
  for_ranges(n, worth_threads(n * kLibmElement), [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) {
      const float x = in[i];
      const float cdf = 0.5f * (1.0f + std::erf(x * kInvSqrt2));
      const float pdf = kInvSqrt2Pi * std::exp(-0.5f * x * x);
      din[i] += dout[i] * (cdf + x * pdf);
    }
  });
}

void silu_forward(float* out, const float* in, long n) {
  for_ranges(n, worth_threads(n * kLibmElement), [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) out[i] = in[i] * sigmoid(in[i]);
  });
}

void silu_backward(float* din, const float* dout, const float* in, long n) {
  for_ranges(n, worth_threads(n * kLibmElement), [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) {
      const float s = sigmoid(in[i]);
      din[i] += dout[i] * s * (1.0f + in[i] * (1.0f - s));
    }
  });
}

void swiglu_forward(float* out, const float* in, int n, int f) {
  for_ranges(n, worth_threads(int64_t(n) * f * kLibmElement), [&](int64_t first, int64_t last) {
    for (int r = int(first); r < int(last); ++r) {
      const float* g = in + size_t(r) * 2 * f;
      const float* u = g + f;
      float* o = out + size_t(r) * f;
      for (int j = 0; j < f; ++j) o[j] = g[j] * sigmoid(g[j]) * u[j];
    }
  });
}

void swiglu_backward(float* din, const float* dout, const float* in, int n, int f) {
  for_ranges(n, worth_threads(int64_t(n) * f * kLibmElement), [&](int64_t first, int64_t last) {
    for (int r = int(first); r < int(last); ++r) {
      const float* g = in + size_t(r) * 2 * f;
      const float* u = g + f;
      const float* dy = dout + size_t(r) * f;
      float* dg = din + size_t(r) * 2 * f;
      float* du = dg + f;
      for (int j = 0; j < f; ++j) {
        const float s = sigmoid(g[j]);
        const float silu = g[j] * s;
        du[j] += dy[j] * silu;
        dg[j] += dy[j] * u[j] * s * (1.0f + g[j] * (1.0f - s));
      }
    }
  });
}

void softmax_forward(float* out, const float* in, int n, int c) {
  for_ranges(n, worth_threads(int64_t(n) * c), [&](int64_t first, int64_t last) {
    for (int r = int(first); r < int(last); ++r) {
      const float* x = in + size_t(r) * c;
      float* y = out + size_t(r) * c;
      float mx = x[0];
      for (int j = 1; j < c; ++j) mx = x[j] > mx ? x[j] : mx;
      float sum = 0.0f;
      for (int j = 0; j < c; ++j) {
        y[j] = fast_exp(x[j] - mx);
        sum += y[j];
      }
      const float inv = 1.0f / sum;
      for (int j = 0; j < c; ++j) y[j] *= inv;
    }
  });
}

void softmax_backward(float* din, const float* dout, const float* out, int n, int c) {
  for_ranges(n, worth_threads(int64_t(n) * c), [&](int64_t first, int64_t last) {
    for (int r = int(first); r < int(last); ++r) {
      const float* y = out + size_t(r) * c;
      const float* dy = dout + size_t(r) * c;
      float dot = 0.0f;
      for (int j = 0; j < c; ++j) dot += dy[j] * y[j];
      float* dx = din + size_t(r) * c;
      for (int j = 0; j < c; ++j) dx[j] += y[j] * (dy[j] - dot);
    }
  });
}

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
ZAYA_CPU_TARGET_END
