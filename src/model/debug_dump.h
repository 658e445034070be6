// `zaya debug-dump`: a random, deliberately non-trivial model (every bias, scale, temperature and
// routing bias perturbed away from its init) plus one forward/backward on random tokens, written
// out so an independent implementation (tests/reference/compare_with_torch.py) can check logits,
// loss, routes and every gradient.
#pragma once

#include <cstdint>
#include <string>

#include "model/config.h"

namespace zaya {

struct DumpOptions {
  uint64_t seed = 1;
  int batch = 2;
  int seq = 24;
};

// Writes DIR/model/{config.json,model.safetensors} and DIR/outputs.safetensors.
void debug_dump(const ModelConfig& config, const DumpOptions& opt, const std::string& dir);

}  // namespace zaya
