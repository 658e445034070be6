// The types of the optimizer's ops on a backend (backend_ops.inc; backend/cpu/optim_ops.h says
// what each computes). An update touches many tensors, each a piece of the flat parameter
// buffer, so the ops take a table of segments and run over all of them in one call: one launch on
// a GPU for the whole AdamW group, not one per tensor.
#pragma once

#include <cstdint>

namespace zaya {

// One tensor's piece of an update: elements [begin, begin + n) of each buffer the op is given.
// `keep` is the weight decay factor (1 − lr·wd, or 1 for tensors that do not decay) and `step`
// the step size, where the op has one per tensor.
struct OptimSegment {
  int64_t begin = 0;
  int64_t n = 0;
  float keep = 1.0f;
  float step = 0.0f;
};

// AdamW's constants for one step (optim/optimizer.h gives the formula), computed in fp64 and
// rounded once so that every backend uses the same floats.
struct AdamwConstants {
  float beta1 = 0, one_minus_beta1 = 0, beta2 = 0, one_minus_beta2 = 0;
  float step_size = 0;     // lr / (1 − β1^t)
  float inv_sqrt_bc2 = 0;  // 1 / sqrt(1 − β2^t)
  float eps = 0;
};

}  // namespace zaya
