#include "data/permutation.h"

#include "core/error.h"
#include "core/rng.h"

namespace zaya {

FeistelPermutation::FeistelPermutation(uint64_t n, uint64_t key) : n_(n), key_(key) {
  ZAYA_CHECK(n > 0 && n <= (uint64_t(1) << 62), "permutation size must be in [1, 2^62], got ", n);
  int bits = 2;
  while ((uint64_t(1) << bits) < n) bits += 2;
  half_bits_ = bits / 2;
  half_mask_ = (uint64_t(1) << half_bits_) - 1;
}

uint64_t FeistelPermutation::encrypt(uint64_t x) const {
  uint64_t left = x >> half_bits_, right = x & half_mask_;
  for (uint32_t round = 0; round < 4; ++round) {
    // Round function: Philox keyed by the permutation key, counter = (right half, round).
    const auto w = philox4x32({uint32_t(right), uint32_t(right >> 32), round, 0x5eed},
                              {uint32_t(key_), uint32_t(key_ >> 32)});
    const uint64_t f = ((uint64_t(w[1]) << 32) | w[0]) & half_mask_;
    const uint64_t next_right = left ^ f;
    left = right;
    right = next_right;
  }
  return (left << half_bits_) | right;
}

uint64_t FeistelPermutation::operator()(uint64_t x) const {
  ZAYA_CHECK(x < n_, "permutation input ", x, " is outside [0, ", n_, ")");
  do {
    x = encrypt(x);
  } while (x >= n_);
  return x;
}

}  // namespace zaya
