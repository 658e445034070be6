// A keyed pseudo-random permutation of [0, n) that needs no table: a 4-round Feistel network over
// the smallest even-bit power of two >= n, with cycle walking (re-apply until the value lands
// below n). A Feistel network is a bijection for any round function, and cycle walking restricts
// a bijection to a subset, so permute() visits each of 0..n-1 exactly once as x runs over 0..n-1.
// The domain is at most 4n, so cycle walking takes under 4 steps on average.
#pragma once

#include <cstdint>

namespace zaya {

class FeistelPermutation {
 public:
  FeistelPermutation(uint64_t n, uint64_t key);
  uint64_t operator()(uint64_t x) const;  // x in [0, n)
  uint64_t size() const { return n_; }

 private:
  uint64_t encrypt(uint64_t x) const;
  uint64_t n_;
  uint64_t key_;
  int half_bits_;
  uint64_t half_mask_;
};

}  // namespace zaya
