#include "model/bf16_split.h"

#include <algorithm>

#include "core/error.h"

namespace zaya {

Bf16Split::Bf16Split(const ParamRegistry& registry, bool bf16_grads)
    : total_(registry.total_floats()) {
  size_t fp32 = 0, grad_fp32 = 0;
  for (const ParamSpec& spec : registry.specs()) {
    if (!runs_.empty()) {  // the alignment padding before spec joins the run before it
      StorageRun& last = runs_.back();
      ZAYA_CHECK(spec.offset >= last.begin + last.n,
                 "bf16 split: the parameter layout overlaps at ", spec.name);
      const size_t padding = spec.offset - (last.begin + last.n);
      last.n += padding;
      if (!last.bf16) fp32 += padding;
      if (!last.bf16_grads) grad_fp32 += padding;
    } else {
      ZAYA_CHECK(spec.offset == 0, "bf16 split: the layout does not start at 0");
    }
    const bool bf16 = weight_in_bf16(spec), grads = bf16_grads && grad_in_bf16(spec);
    if (!runs_.empty() && runs_.back().bf16 == bf16 && runs_.back().bf16_grads == grads)
      runs_.back().n += size_t(spec.numel);
    else
      runs_.push_back(StorageRun{spec.offset, size_t(spec.numel), bf16, grads, fp32, grad_fp32});
    if (!bf16) fp32 += size_t(spec.numel);
    if (!grads) grad_fp32 += size_t(spec.numel);
  }
  fp32_floats_ = fp32;
  grad_fp32_floats_ = grad_fp32;
}

const StorageRun& Bf16Split::run_at(size_t offset) const {
  auto it = std::upper_bound(runs_.begin(), runs_.end(), offset,
                             [](size_t o, const StorageRun& r) { return o < r.begin; });
  ZAYA_CHECK(it != runs_.begin() && offset < total_, "bf16 split: no run holds flat offset ",
             offset, " (", total_, " parameters)");
  return *(it - 1);
}

void Bf16Split::for_each_run(
    size_t offset, size_t n,
    const std::function<void(const StorageRun&, size_t, size_t)>& fn) const {
  if (n == 0) return;
  const size_t end = offset + n;
  for (const StorageRun* r = &run_at(offset); r != runs_.data() + runs_.size() && r->begin < end;
       ++r)
    fn(*r, std::max(r->begin, offset), std::min(r->begin + r->n, end));
}

int64_t Bf16Split::fp32_count(size_t offset, size_t n) const {
  // fp32 values below x: the fp32 runs before x's run (its fp32_at) and x's own part.
  auto below = [&](size_t x) -> size_t {
    if (x >= total_) return fp32_floats_;
    const StorageRun& r = run_at(x);
    return r.fp32_at + (r.bf16 ? 0 : x - r.begin);
  };
  return int64_t(below(offset + n) - below(offset));
}

}  // namespace zaya
