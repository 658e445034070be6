// Helpers shared by the unit tests: scratch directories, error capture, flat layouts, the tiny
// config, the CPU vector paths this machine runs.
#pragma once

#include <unistd.h>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/vector_path.h"
#include "core/error.h"
#include "model/config.h"
#include "model/params.h"

namespace zaya::test {

// A fresh, empty directory under the system temp dir, unique to this process.
inline std::filesystem::path temp_dir(const std::string& name) {
  const auto p = std::filesystem::temp_directory_path() /
                 ("zaya_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}

// The message of the zaya::Error that f throws, or "" when it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Tensors p0, p1, ... of the given shapes and groups, back to back in one flat buffer of `total`
// floats (the registry's layout), for optimizer tests that need no model.
inline std::vector<ParamSpec> flat_layout(const std::vector<std::pair<Shape, OptimGroup>>& list,
                                          size_t& total) {
  std::vector<ParamSpec> specs;
  for (const auto& [shape, group] : list) {
    ParamSpec p;
    p.name = str_cat("p", specs.size());
    p.shape = shape;
    p.group = group;
    specs.push_back(p);
  }
  total = assign_flat_offsets(specs);
  return specs;
}

// n draws of N(0, 1) from a generator seeded with `seed`.
inline std::vector<float> normal_floats(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(g);
  return v;
}

// configs/tiny.json's model: 6 stages, 4 experts, vocabulary 97.
inline ModelConfig tiny_config() {
  return load_model_config(ZAYA_SOURCE_DIR "/configs/tiny.json");
}

// Moves every parameter of `m` away from its trivial init (after init(seed)), so that no
// gradient is zero by accident and the routers spread tokens over every route: the embedding
// N(0, 1), ones 1 + 0.2·N, zeros 0.05·N, matrices N · 0.5 / sqrt(fan_in), the skip bias 0.
inline void randomise_weights(ParamStore& params, uint64_t seed, uint32_t stream) {
  params.init(seed);
  std::mt19937 g{stream};
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (const auto& s : params.registry().specs()) {
    float* p = params.weights() + s.offset;
    for (int64_t k = 0; k < s.numel; ++k) {
      if (s.name == "model.embed_tokens.weight")
        p[k] = n(g);
      else if (s.init == InitKind::Ones)
        p[k] = 1.0f + 0.2f * n(g);
      else if (s.init == InitKind::Zeros)
        p[k] = 0.05f * n(g);
      else if (s.init == InitKind::SkipBias)
        p[k] = 0.0f;
      else if (s.init == InitKind::Normal)
        p[k] = n(g) * 0.5f / std::sqrt(float(s.shape.back()));
    }
  }
}

// The CPU vector paths built into this binary that this machine runs: at least the build's own
// level; on an AVX2 machine the release build's baseline and avx2, with AVX-512 all three.
inline std::vector<VectorPath> paths_this_cpu_runs() {
  std::vector<VectorPath> runs;
  for (const VectorPath p : built_vector_paths())
    if (missing_cpu_features(p).empty()) runs.push_back(p);
  EXPECT_FALSE(runs.empty()) << built_vector_paths_text();
  return runs;
}

}  // namespace zaya::test
