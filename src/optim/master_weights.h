// The fp32 master weights of a training run whose weights are stored in bf16 alone
// (ParameterPlacement::set_bf16_weight_storage): the flat range [begin, end) this rank's optimizer
// updates (its ZeRO-1 range, optim/shard_layout.h), in the backend's memory. Mixed-precision
// training keeps them beside the model rather than in it: the model computes with the bf16
// values; the optimizer steps these and stores their rounding into the model
// (ParameterPlacement::store_weights). 4 bytes per parameter of the range.
#pragma once

#include <cstddef>

#include "backend/backend.h"
#include "model/params.h"

namespace zaya {

class MasterWeights {
 public:
  MasterWeights() = default;
  // The range's values, loaded from the host copy `params` (its fp32 weights).
  MasterWeights(const Backend& be, const ParamStore& params, size_t begin, size_t end);

  float* values() { return values_.floats(); }  // [end − begin], the backend's memory
  size_t begin() const { return begin_; }
  size_t end() const { return end_; }
  size_t bytes() const { return values_.bytes(); }
  bool empty() const { return end_ == begin_; }

  // Host → master for the part of flat [offset, offset + n) inside the range (a resume, or
  // the router balancer's biases, which the host holds).
  void load(const ParamStore& params, size_t offset, size_t n);
  // Master → host for the whole range (checkpoints keep the exact master values, where the rest
  // of the host copy holds the stored bf16 values).
  void save(ParamStore& params) const;

 private:
  const Backend* be_ = nullptr;
  size_t begin_ = 0, end_ = 0;
  BackendBuffer values_;
};

}  // namespace zaya
