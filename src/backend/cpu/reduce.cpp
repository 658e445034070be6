#include "backend/cpu/reduce.h"

#include <cstddef>
#include <vector>

ZAYA_CPU_TARGET_BEGIN
namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

void column_dot(double* out, const float* a, const float* b, const float* b_shift,
                const float* row_scale, int n, int c) {
  constexpr int kChunk = 32;
  const int chunks = (n + kChunk - 1) / kChunk;
  // Kept from call to call (per calling thread): a fresh 128 KB vector a call was memory taken
  // from and given back to the system, page faults every step. The threads of the loop below
  // reach it through `sums` (the name `scratch` would be each thread's own).
  thread_local std::vector<double> scratch;
  scratch.assign(size_t(chunks) * c, 0.0);
  double* const sums = scratch.data();
#pragma omp parallel for schedule(static)
  for (int k = 0; k < chunks; ++k) {
    double* p = sums + size_t(k) * c;
    const int end = n < (k + 1) * kChunk ? n : (k + 1) * kChunk;
    for (int i = k * kChunk; i < end; ++i) {
      const float* ai = a + size_t(i) * c;
      const double s = row_scale ? double(row_scale[i]) : 1.0;
      if (b) {
        const float* bi = b + size_t(i) * c;
        if (b_shift) {
          for (int j = 0; j < c; ++j) p[j] += double(ai[j]) * double(bi[j] + b_shift[j]) * s;
        } else {
          for (int j = 0; j < c; ++j) p[j] += double(ai[j]) * double(bi[j]) * s;
        }
      } else {
        for (int j = 0; j < c; ++j) p[j] += double(ai[j]) * s;
      }
    }
  }
  for (int j = 0; j < c; ++j) out[j] = 0.0;
  for (int k = 0; k < chunks; ++k)
    for (int j = 0; j < c; ++j) out[j] += sums[size_t(k) * c + j];
}

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
ZAYA_CPU_TARGET_END
