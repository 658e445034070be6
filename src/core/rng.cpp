#include "core/rng.h"

#include <cmath>

namespace zaya {

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(kMul0) * c[0];
    const uint64_t p1 = uint64_t(kMul1) * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k[1],
         uint32_t(p0)};
    k[0] += kWeyl0;
    k[1] += kWeyl1;
  }
  return c;
}

std::array<uint32_t, 4> Philox::words(uint64_t index) const {
  return philox4x32(
      {uint32_t(index), uint32_t(index >> 32), uint32_t(stream_), uint32_t(stream_ >> 32)},
      {uint32_t(seed_), uint32_t(seed_ >> 32)});
}

static float to_open_unit(uint32_t w) {
  // 24 random bits, centred in their bucket: (w + 0.5) / 2^24 lies strictly inside (0, 1).
  return (float(w >> 8) + 0.5f) * (1.0f / 16777216.0f);
}

float Philox::uniform(uint64_t index) const {
  return to_open_unit(words(index)[0]);
}

float Philox::normal(uint64_t index) const {
  const auto w = words(index);
  const double u1 = to_open_unit(w[0]), u2 = to_open_unit(w[1]);
  return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

uint64_t hash_name(const char* s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; ++s) {
    h ^= uint8_t(*s);
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace zaya
