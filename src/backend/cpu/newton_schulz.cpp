#include "backend/newton_schulz.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/matmul.h"
#include "core/error.h"

namespace zaya {

void newton_schulz(const float* g, float* out, int64_t rows, int64_t cols, int steps,
                   NsWorkspace& ws, const NsCoefficients& coef) {
  ZAYA_CHECK(rows > 0 && cols > 0, "newton_schulz: empty matrix [", rows, ", ", cols, "]");
  const bool transposed = rows > cols;
  const int64_t m = std::min(rows, cols);  // Gram side
  const int64_t n = std::max(rows, cols);
  const size_t count = size_t(m * n);
  ws.x.resize(count);
  ws.y.resize(count);
  ws.gram.resize(size_t(m * m));
  ws.poly.resize(size_t(m * m));

  // Frobenius norm in fp64, sequential: a fixed order keeps the result bitwise reproducible.
  double sum_sq = 0;
  for (size_t i = 0; i < count; ++i) sum_sq += double(g[i]) * double(g[i]);
  const float denom = float(std::sqrt(sum_sq) + 1e-7);

  float* x = ws.x.data();
  if (transposed) {  // x[c, r] = g[r, c]
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) x[c * rows + r] = g[r * cols + c] / denom;
  } else {
    for (size_t i = 0; i < count; ++i) x[i] = g[i] / denom;
  }

  float* y = ws.y.data();
  float* gram = ws.gram.data();
  float* poly = ws.poly.data();
  const int mi = int(m), ni = int(n);
  for (int s = 0; s < steps; ++s) {
    cpu::gemm(false, true, mi, mi, ni, 1.0f, x, ni, x, ni, 0.0f, gram, mi);  // A = X Xᵀ
    std::copy(gram, gram + m * m, poly);
    cpu::gemm(false, false, mi, mi, mi, coef.c, gram, mi, gram, mi, coef.b, poly, mi);  // bA + cA²
    std::copy(x, x + count, y);
    cpu::gemm(false, false, mi, ni, mi, 1.0f, poly, mi, x, ni, coef.a, y, ni);  // aX + B X
    std::swap(x, y);
  }

  if (transposed) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = x[c * rows + r];
  } else {
    std::copy(x, x + count, out);
  }
}

}  // namespace zaya
