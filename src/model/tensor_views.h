// What a stage's tensor views point at (model/cca.h, model/moe.h, model/zaya_model.h): the
// weights the ops read (WeightViews: the products' weights typed, since they may be bf16; every
// other tensor fp32) or the gradients the backward adds into (GradViews, likewise). One binding
// fills either (ZayaModel::bind_stage).
#pragma once

#include "backend/weight_ref.h"

namespace zaya {

struct WeightViews {
  using Product = WeightRef;
  using Plain = const float*;
};

struct GradViews {
  using Product = GradRef;
  using Plain = float*;
};

// How decoding names the products' weights it reads (its row products take fp32 weights only:
// Backend::rows_matmul_forward).
inline constexpr const char* kDecodeWeights = "decoding's product weights";

}  // namespace zaya
