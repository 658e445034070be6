// What the decoder tests share: a tiny model whose every weight matters, random token sequences
// and the relative error of logits.
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <span>
#include <vector>

#include "model/config.h"
#include "model/zaya_model.h"
#include "test_util.h"

namespace zaya::test {

// The tiny model with every weight moved off its initial value (norm gains, conv biases, key
// temperatures and residual scales included), so every term of the decode path matters, and
// weights large enough that the routers spread tokens over every route.
inline ZayaModel perturbed_tiny(uint64_t seed) {
  ZayaModel m(load_model_config(ZAYA_SOURCE_DIR "/configs/tiny.json"));
  randomise_weights(m.params(), seed, uint32_t(seed) + 1);
  return m;
}

inline std::vector<int32_t> random_tokens(int n, int vocab, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int32_t> d(0, vocab - 1);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = d(g);
  return t;
}

// max |a − b| / max |b|
inline double relative_error(std::span<const float> a, std::span<const float> b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return diff / scale;
}

}  // namespace zaya::test
