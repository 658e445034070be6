#include "backend/cpu/rope.h"
#include <cstddef>

#include <cmath>

#include "backend/cpu/parallel_threshold.h"

namespace zaya {

void rope_tables(float* cos_out, float* sin_out, int seq, int rot, float theta) {
  const int half = rot / 2;
  for (int i = 0; i < half; ++i) {
    const float exponent = float(2 * i) / float(rot);
    const float inv_freq = 1.0f / std::pow(theta, exponent);
    for (int s = 0; s < seq; ++s) {
      const float angle = float(s) * inv_freq;
      cos_out[size_t(s) * half + i] = std::cos(angle);
      sin_out[size_t(s) * half + i] = std::sin(angle);
    }
  }
}

}  // namespace zaya

namespace zaya::cpu {

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

}  // namespace zaya::cpu
