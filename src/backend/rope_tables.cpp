#include "backend/rope_tables.h"

#include <cmath>
#include <cstddef>

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
