// The flat parameter layout split for bf16 weights (model/params.h's weight_in_bf16 and
// grad_in_bf16): runs of tensors kept alike, in flat order, the alignment padding after a tensor
// joining its run. ParameterPlacement lays its bf16 weight storage out by it (the bf16 values at
// their flat offsets, the fp32 tensors packed one after another), and optim's bf16 weight codec
// packs ZeRO-1's all-gather by it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "model/params.h"

namespace zaya {

struct StorageRun {
  size_t begin = 0, n = 0;  // flat [begin, begin + n)
  bool bf16 = false;        // the weights in bf16 (else fp32, packed at fp32_at)
  bool bf16_grads = false;  // the gradients in bf16 (else fp32, packed at grad_fp32_at)
  size_t fp32_at = 0, grad_fp32_at = 0;
};

class Bf16Split {
 public:
  Bf16Split() = default;
  // bf16_grads: whether the gradients that may be bf16 (grad_in_bf16) are.
  Bf16Split(const ParamRegistry& registry, bool bf16_grads);

  bool empty() const { return runs_.empty(); }
  const StorageRun& run_at(size_t offset) const;  // the run holding flat `offset`
  // fn(run, lo, hi) for each run's part [lo, hi) of flat [offset, offset + n), in order.
  void for_each_run(size_t offset, size_t n,
                    const std::function<void(const StorageRun&, size_t, size_t)>& fn) const;
  // Floats of the fp32 weights and gradients, packed.
  size_t fp32_floats() const { return fp32_floats_; }
  size_t grad_fp32_floats() const { return grad_fp32_floats_; }
  // How many of flat [offset, offset + n)'s weights are fp32.
  int64_t fp32_count(size_t offset, size_t n) const;

 private:
  std::vector<StorageRun> runs_;
  size_t total_ = 0;
  size_t fp32_floats_ = 0, grad_fp32_floats_ = 0;
};

}  // namespace zaya
