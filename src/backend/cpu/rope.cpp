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
#pragma omp parallel for collapse(2) \
    schedule(static) if (worth_threads(int64_t(batch) * seq * heads * rot))
  for (int b = 0; b < batch; ++b) {
    for (int s = 0; s < seq; ++s) {
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
  }
}

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
ZAYA_CPU_TARGET_END
