#include "backend/cpu/norm.h"
#include <cstddef>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/parallel_threshold.h"
#include "backend/cpu/reduce.h"

ZAYA_CPU_TARGET_BEGIN
namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

namespace {

// Rows whose float64 sums of squares (or dot products) advance together: each row's sum is a chain
// of dependent adds in column order, the same additions as one row at a time, so the same bits;
// kRows chains side by side hide the adds' latency.
constexpr int kRows = 8;

// sums[i] = Σ_j f(i, j) in column order, for the `count` ≤ kRows rows of one block.
template <class F>
void row_sums(double* sums, int count, int c, F&& f) {
  double s[kRows] = {};
  if (count == kRows) {
    for (int j = 0; j < c; ++j)
      for (int i = 0; i < kRows; ++i) s[i] += f(i, j);
  } else {
    for (int i = 0; i < count; ++i)
      for (int j = 0; j < c; ++j) s[i] += f(i, j);
  }
  for (int i = 0; i < count; ++i) sums[i] = s[i];
}

}  // namespace

void rmsnorm_forward(float* out, float* rstd, const float* in, const float* w, int n, int c,
                     float eps) {
  const int blocks = (n + kRows - 1) / kRows;
  for_ranges(blocks, worth_threads(int64_t(n) * c), [&](int64_t first, int64_t last) {
    for (int b = int(first); b < int(last); ++b) {
      const int i0 = b * kRows, count = std::min(kRows, n - i0);
      const float* x0 = in + size_t(i0) * c;
      double ss[kRows];
      row_sums(ss, count, c, [&](int i, int j) {
        const float x = x0[size_t(i) * c + j];
        return double(x) * x;
      });
      for (int i = 0; i < count; ++i) {
        const float* x = x0 + size_t(i) * c;
        float* y = out + size_t(i0 + i) * c;
        const float r = float(1.0 / std::sqrt(ss[i] / c + eps));
        for (int j = 0; j < c; ++j) y[j] = x[j] * r * w[j];
        if (rstd) rstd[i0 + i] = r;
      }
    }
  });
}

void rmsnorm_backward(float* din, float* dw, const float* dout, const float* in, const float* w,
                      const float* rstd, int n, int c) {
  if (din) {
    const int blocks = (n + kRows - 1) / kRows;
    for_ranges(blocks, worth_threads(int64_t(n) * c), [&](int64_t first, int64_t last) {
      for (int b = int(first); b < int(last); ++b) {
        const int i0 = b * kRows, count = std::min(kRows, n - i0);
        const float* x0 = in + size_t(i0) * c;
        const float* dy0 = dout + size_t(i0) * c;
        double dots[kRows];  // Σ dy·w·x
        row_sums(dots, count, c, [&](int i, int j) {
          return double(dy0[size_t(i) * c + j]) * w[j] * x0[size_t(i) * c + j];
        });
        for (int i = 0; i < count; ++i) {
          const float* x = x0 + size_t(i) * c;
          const float* dy = dy0 + size_t(i) * c;
          const double r = rstd[i0 + i];
          const double coef = r * r * r * dots[i] / c;
          float* dx = din + size_t(i0 + i) * c;
          for (int j = 0; j < c; ++j) dx[j] += float(r * dy[j] * w[j] - coef * x[j]);
        }
      }
    });
  }
  if (dw) {
    std::vector<double> sum(c);
    column_dot(sum.data(), dout, in, nullptr, rstd, n, c);  // Σ dy · x · rstd
    for (int j = 0; j < c; ++j) dw[j] += float(sum[j]);
  }
}

void l2norm_forward(float* out, float* inv_norm, const float* in, const float* temp, int n,
                    int heads, int d) {
  const double sqrt_d = std::sqrt(double(d));
  for_ranges(n * heads, worth_threads(int64_t(n) * heads * d), [&](int64_t first, int64_t last) {
    for (int i = int(first); i < int(last); ++i) {
      const int h = i % heads;
      const float* x = in + size_t(i) * d;
      double ss = 0.0;
      for (int j = 0; j < d; ++j) ss += double(x[j]) * x[j];
      const double inv = 1.0 / std::sqrt(ss);
      const float s = float(sqrt_d * inv * (temp ? temp[h] : 1.0f));
      for (int j = 0; j < d; ++j) out[size_t(i) * d + j] = x[j] * s;
      inv_norm[i] = float(inv);
    }
  });
}

void l2norm_backward(float* din, float* dtemp, const float* dout, const float* in,
                     const float* temp, const float* inv_norm, int n, int heads, int d) {
  const double sqrt_d = std::sqrt(double(d));
  // dtemp partial sums per row, reduced afterwards in row order (deterministic).
  std::vector<double> tsum(dtemp ? size_t(n) * heads : 0);
  for_ranges(n * heads, worth_threads(int64_t(n) * heads * d), [&](int64_t first, int64_t last) {
    for (int i = int(first); i < int(last); ++i) {
      const int h = i % heads;
      const float* x = in + size_t(i) * d;
      const float* dy = dout + size_t(i) * d;
      const double inv = inv_norm[i];
      double dot = 0.0;  // x̂·dy
      for (int j = 0; j < d; ++j) dot += double(x[j]) * inv * dy[j];
      if (dtemp) tsum[i] = sqrt_d * dot;
      if (din) {
        const double s = sqrt_d * (temp ? temp[h] : 1.0f);
        float* dx = din + size_t(i) * d;
        for (int j = 0; j < d; ++j) dx[j] += float(s * inv * (dy[j] - x[j] * inv * dot));
      }
    }
  });
  if (dtemp) {
    for (int h = 0; h < heads; ++h) {
      double s = 0.0;
      for (int r = 0; r < n; ++r) s += tsum[size_t(r) * heads + h];
      dtemp[h] += float(s);
    }
  }
}

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
ZAYA_CPU_TARGET_END
