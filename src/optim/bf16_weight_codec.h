// ZeRO-1's all-gather of weights stored in bf16 (Zero1Sync::WeightCodec): a piece of flat
// [offset, offset + n) travels as the bf16 values of its bf16 tensors plus, in order, the fp32
// values of the tensors kept in fp32 (a few per mille), about half the bytes of the fp32 master.
// The owner rounds its master once (pack); every rank puts the gathered piece into its model's
// storage as it came (store), so every rank holds the rounding of the owner's master. The split is
// the model's (model/bf16_split.h); the codec is the optimizer's, as the master weights are.
#pragma once

#include "model/bf16_split.h"
#include "model/parameter_placement.h"
#include "optim/zero1_sync.h"

namespace zaya {

class Bf16WeightCodec {
 public:
  explicit Bf16WeightCodec(ParameterPlacement& placement);

  // How many of flat [offset, offset + n)'s weights are fp32.
  int64_t fp32_count(size_t offset, size_t n) const { return split_.fp32_count(offset, n); }
  // values (fp32, flat [offset, offset + n), the backend's memory) → bf16[n] (the bf16 tensors'
  // slots filled, the others unused) and fp32[fp32_count] (the fp32 tensors' values in order).
  void pack(size_t offset, size_t n, const float* values, uint16_t* bf16, float* fp32) const;
  // The inverse, into the placement's storage.
  void store(size_t offset, size_t n, const uint16_t* bf16, const float* fp32) const;
  // The four functions Zero1Sync takes.
  Zero1Sync::WeightCodec functions() const;

 private:
  ParameterPlacement& placement_;
  Bf16Split split_;
};

}  // namespace zaya
