// Counter-based random numbers (Philox-4x32-10, Salmon et al. 2011). A draw is a pure function of
// (seed, stream, index): no hidden state, so any rank can produce any element of any random tensor
// and results never depend on thread count, world size or the order tensors are initialised in.
#pragma once

#include <array>
#include <cstdint>

namespace zaya {

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

class Philox {
 public:
  Philox(uint64_t seed, uint64_t stream) : seed_(seed), stream_(stream) {}
  // Four independent 32-bit words for counter `index`.
  std::array<uint32_t, 4> words(uint64_t index) const;
  // Uniform in (0, 1), never exactly 0 or 1 (safe for log).
  float uniform(uint64_t index) const;
  // Standard normal (Box-Muller on the first two words of `index`).
  float normal(uint64_t index) const;
  uint64_t seed() const { return seed_; }
  uint64_t stream() const { return stream_; }

 private:
  uint64_t seed_;
  uint64_t stream_;
};

// Stable 64-bit hash of a string (FNV-1a), used to derive per-tensor streams from tensor names.
uint64_t hash_name(const char* s);

}  // namespace zaya
