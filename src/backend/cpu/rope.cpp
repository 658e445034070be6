#include "backend/cpu/rope.h"

#include <cstddef>

#include "backend/cpu/parallel_threshold.h"

ZAYA_CPU_TARGET_BEGIN
namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

void rope_apply(float* x, const float* cos_t, const float* sin_t, int batch, int seq, int heads,
                int d, int rot, bool inverse) {
  const int half = rot / 2;
  const float sign = inverse ? -1.0f : 1.0f;
  // One range item per (sequence, position) row of heads.
  const int64_t rows = int64_t(batch) * seq;
  for_ranges(rows, worth_threads(rows * heads * rot), [&](int64_t first, int64_t last) {
    for (int64_t row = first; row < last; ++row) {
      const int64_t b = row / seq, s = row % seq;
      const float* c = cos_t + size_t(s) * half;
      const float* sn = sin_t + size_t(s) * half;
      for (int h = 0; h < heads; ++h) {
        float* v = x + ((size_t(b) * seq + s) * heads + h) * d;
        for (int i = 0; i < half; ++i) {
          const float x1 = v[i], x2 = v[i + half], si = sign * sn[i];
          v[i] = x1 * c[i] - x2 * si;
          v[i + half] = x2 * c[i] + x1 * si;
        }
      }
    }
  });
}

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
ZAYA_CPU_TARGET_END
