// Where the parameters live (parameter_placement.h): the host's ParamStore, its copies in a
// backend's memory, and the bf16 weight storage (the flat parameters as runs of bf16 and fp32
// tensors, the addresses the ops read, and the moves between the host's fp32 copy and the
// backend's buffers).
#include <algorithm>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "model/parameter_placement.h"

namespace zaya {

namespace {

// Floats per chunk of the host ⇄ storage moves (16 MiB of staging in the backend's memory).
constexpr size_t kStagingFloats = size_t(1) << 22;

}  // namespace

ParameterPlacement::ParameterPlacement(const ModelConfig& config)
    : params_(config), be_(&cpu_backend()) {}

void ParameterPlacement::set_backend(const Backend& backend) {
  be_ = &backend;
  // The old buffers go first, so that the new ones never sit beside them.
  release_device_parameters();
  if (!backend.host_memory()) {
    const size_t bytes = sizeof(float) * params_.size();
    if (bf16_storage_wanted_ && backend.bf16_weights()) {
      if (!bf16_grads_wanted_) dev_grads_ = BackendBuffer(backend, bytes);
      lay_out_bf16_storage();  // the weights come with the next push
    } else {
      dev_grads_ = BackendBuffer(backend, bytes);
      dev_weights_ = BackendBuffer(backend, bytes);
    }
  }
  layout_changed();
  if (!backend.host_memory() && resident_) set_resident(true);  // the new memory gets the weights
}

void ParameterPlacement::release_device_parameters() {
  for (BackendBuffer* b : {&dev_weights_, &dev_grads_, &dev_w16_, &dev_w32_, &dev_master_,
                           &dev_staging_, &dev_g16_, &dev_g32_})
    b->reset();
  weight_addresses_.reset();
  grad_addresses_.reset();
  stored_runs_.clear();
}

void ParameterPlacement::set_resident(bool resident) {
  resident_ = resident;
  if (!this->resident()) return;
  push_weights();
  zero_grads();
}

void ParameterPlacement::zero_grads() {
  if (bf16_gradients()) {
    be_->fill_zero(dev_g16_.get(), dev_g16_.bytes());
    be_->fill_zero(dev_g32_.get(), dev_g32_.bytes());
  } else if (resident()) {
    be_->fill_zero(dev_grads_.floats(), dev_grads_.bytes());
  } else {
    params_.zero_grads();
  }
}

float* ParameterPlacement::backend_grads() {
  ZAYA_CHECK(!bf16_gradients(),
             "ParameterPlacement::backend_grads: with bf16 gradients the gradients are not one "
             "fp32 buffer "
             "(load_grads())");
  return grads_base();
}

void ParameterPlacement::push_weights() {
  push_weights(0, params_.size());
}

void ParameterPlacement::push_weights(size_t offset, size_t n) {
  ZAYA_CHECK(offset + n <= params_.size(), "ParameterPlacement::push_weights: [", offset, ", ",
             offset + n, ") is outside the ", params_.size(), " parameters");
  if (bf16_weight_storage())
    push_stored(offset, n);
  else if (!be_->host_memory())
    be_->to_device(dev_weights_.floats() + offset, params_.weights() + offset, sizeof(float) * n);
}

void ParameterPlacement::pull_weights() {
  if (bf16_weight_storage())
    pull_stored();
  else if (!be_->host_memory())
    be_->to_host(params_.weights(), dev_weights_.floats(), sizeof(float) * params_.size());
}

float* ParameterPlacement::backend_weights() {
  ZAYA_CHECK(
      !bf16_weight_storage(),
      "ParameterPlacement::backend_weights: with bf16 weight storage the weights are not one fp32 "
      "buffer (master_weights(), store_weights())");
  return const_cast<float*>(weights_base());
}

const float* ParameterPlacement::weights_base() const {
  return be_->host_memory() ? params_.weights() : dev_weights_.floats();
}

float* ParameterPlacement::grads_base() {
  return be_->host_memory() ? params_.grads() : dev_grads_.floats();
}

const float* ParameterPlacement::stored_weight_addresses() const {
  return static_cast<const float*>(weight_addresses_.get());
}

const uint16_t* ParameterPlacement::stored_bf16_weights() const {
  return static_cast<const uint16_t*>(dev_w16_.get());
}

const float* ParameterPlacement::stored_grad_addresses() const {
  return static_cast<const float*>(grad_addresses_.get());
}

uint16_t* ParameterPlacement::stored_bf16_grads() {
  return static_cast<uint16_t*>(dev_g16_.get());
}

void ParameterPlacement::set_bf16_weight_storage(size_t master_begin, size_t master_end,
                                                 bool bf16_gradients) {
  ZAYA_CHECK(master_begin <= master_end && master_end <= params_.size(),
             "ParameterPlacement::set_bf16_weight_storage: the master range [", master_begin, ", ",
             master_end, ") is not inside the ", params_.size(), " parameters");
  bf16_storage_wanted_ = true;
  bf16_grads_wanted_ = bf16_gradients;
  master_begin_ = master_begin;
  master_end_ = master_end;
  // On a backend that takes it, lay it out now and fill it from the host copy of the weights
  // (set_backend does when the parameters are resident).
  if (!be_->host_memory() && be_->bf16_weights()) {
    set_backend(*be_);
    if (!resident_) push_weights();
  }
}

void ParameterPlacement::lay_out_bf16_storage() {
  const size_t n = params_.size();
  stored_runs_.clear();
  size_t fp32 = 0, grad_fp32 = 0;
  for (const ParamSpec& spec : params_.registry().specs()) {
    if (!stored_runs_.empty()) {  // the alignment padding before spec joins the run before it
      StoredRun& last = stored_runs_.back();
      ZAYA_CHECK(spec.offset >= last.begin + last.n,
                 "bf16 weight storage: the parameter layout overlaps at ", spec.name);
      const size_t padding = spec.offset - (last.begin + last.n);
      last.n += padding;
      if (!last.bf16) fp32 += padding;
      if (!last.bf16_grads) grad_fp32 += padding;
    } else {
      ZAYA_CHECK(spec.offset == 0, "bf16 weight storage: the layout does not start at 0");
    }
    const bool bf16 = weight_in_bf16(spec), bf16_grads = bf16_grads_wanted_ && grad_in_bf16(spec);
    if (!stored_runs_.empty() && stored_runs_.back().bf16 == bf16 &&
        stored_runs_.back().bf16_grads == bf16_grads) {
      stored_runs_.back().n += size_t(spec.numel);
    } else {
      stored_runs_.push_back(
          StoredRun{spec.offset, size_t(spec.numel), bf16, bf16_grads, fp32, grad_fp32});
    }
    if (!bf16) fp32 += size_t(spec.numel);
    if (!bf16_grads) grad_fp32 += size_t(spec.numel);
  }
  // The bf16 buffer keeps the flat layout (a weight's bf16 value at its flat offset); the slots
  // of the fp32 tensors in it go unused, a few per mille of it.
  dev_w16_ = BackendBuffer(*be_, sizeof(uint16_t) * n);
  dev_w32_ = BackendBuffer(*be_, sizeof(float) * fp32);
  dev_master_ = BackendBuffer(*be_, sizeof(float) * (master_end_ - master_begin_));
  dev_staging_ = BackendBuffer(*be_, sizeof(float) * std::min(n, kStagingFloats));
  weight_addresses_ = ReservedAddresses(sizeof(float) * n);
  if (bf16_grads_wanted_) {  // no full fp32 gradients (set_backend made none): two kinds
    dev_g16_ = BackendBuffer(*be_, sizeof(uint16_t) * n);
    dev_g32_ = BackendBuffer(*be_, sizeof(float) * grad_fp32);
    grad_addresses_ = ReservedAddresses(sizeof(float) * n);
  } else {
    dev_g16_.reset();
    dev_g32_.reset();
    grad_addresses_.reset();
  }
}

const ParameterPlacement::StoredRun& ParameterPlacement::stored_run(size_t offset) const {
  auto it = std::upper_bound(stored_runs_.begin(), stored_runs_.end(), offset,
                             [](size_t o, const StoredRun& r) { return o < r.begin; });
  ZAYA_CHECK(it != stored_runs_.begin(), "bf16 weight storage: no run holds offset ", offset);
  return *(it - 1);
}

void ParameterPlacement::for_each_run(
    size_t offset, size_t n,
    const std::function<void(const StoredRun*, size_t, size_t)>& fn) const {
  const size_t end = offset + n;
  for (const StoredRun* r = n ? &stored_run(offset) : nullptr;
       r != nullptr && r != stored_runs_.data() + stored_runs_.size() && r->begin < end; ++r)
    fn(r, std::max(r->begin, offset), std::min(r->begin + r->n, end));
}

const float* ParameterPlacement::weight_address(size_t offset) const {
  if (!bf16_weight_storage()) return weights_base() + offset;
  const StoredRun& r = stored_run(offset);
  if (r.bf16) return static_cast<const float*>(weight_addresses_.get()) + offset;
  return dev_w32_.floats() + r.fp32_at + (offset - r.begin);
}

float* ParameterPlacement::grad_address(size_t offset) {
  if (!bf16_gradients()) return grads_base() + offset;
  const StoredRun& r = stored_run(offset);
  if (r.bf16_grads) return static_cast<float*>(grad_addresses_.get()) + offset;
  return dev_g32_.floats() + r.grad_fp32_at + (offset - r.begin);
}

void ParameterPlacement::load_grads(size_t offset, size_t n, float* dst) {
  ZAYA_CHECK(offset + n <= params_.size(), "ParameterPlacement::load_grads: [", offset, ", ",
             offset + n, ") is outside the ", params_.size(), " parameters");
  if (!bf16_gradients()) {
    be_->copy(dst, grads_base() + offset, sizeof(float) * n);
    return;
  }
  const auto* g16 = static_cast<const uint16_t*>(dev_g16_.get());
  for_each_run(offset, n, [&](const StoredRun* r, size_t lo, size_t hi) {
    if (r->bf16_grads)
      be_->widen_bf16(dst + (lo - offset), g16 + lo, hi - lo);
    else
      be_->copy(dst + (lo - offset), dev_g32_.floats() + r->grad_fp32_at + (lo - r->begin),
                sizeof(float) * (hi - lo));
  });
}

void ParameterPlacement::fill_grads(float value) {
  if (!bf16_gradients()) {
    be_->fill(grads_base(), params_.size(), value);
    return;
  }
  be_->fill(dev_g32_.floats(), dev_g32_.bytes() / sizeof(float), value);
  // The bf16 ones a staging chunk at a time (one rounding of `value`, the same for all).
  const size_t n = params_.size(), chunk = dev_staging_.bytes() / sizeof(float);
  be_->fill(dev_staging_.floats(), chunk, value);
  auto* g16 = static_cast<uint16_t*>(dev_g16_.get());
  for (size_t at = 0; at < n; at += chunk)
    be_->round_to_bf16(g16 + at, dev_staging_.floats(), std::min(chunk, n - at));
}

void ParameterPlacement::store_weights(size_t offset, size_t n, const float* values) {
  ZAYA_CHECK(bf16_weight_storage(), "ParameterPlacement::store_weights needs bf16 weight storage");
  ZAYA_CHECK(offset + n <= params_.size(), "ParameterPlacement::store_weights: [", offset, ", ",
             offset + n, ") is outside the ", params_.size(), " parameters");
  auto* w16 = static_cast<uint16_t*>(dev_w16_.get());
  for_each_run(offset, n, [&](const StoredRun* r, size_t lo, size_t hi) {
    if (r->bf16)
      be_->round_to_bf16(w16 + lo, values + (lo - offset), hi - lo);
    else
      be_->copy(dev_w32_.floats() + r->fp32_at + (lo - r->begin), values + (lo - offset),
                sizeof(float) * (hi - lo));
  });
}

int64_t ParameterPlacement::fp32_count(size_t offset, size_t n) const {
  ZAYA_CHECK(bf16_weight_storage(), "ParameterPlacement::fp32_count needs bf16 weight storage");
  // fp32 values below flat x: the fp32 runs before x's run (its fp32_at) and x's own part.
  auto below = [&](size_t x) -> size_t {
    if (x >= params_.size()) return dev_w32_.bytes() / sizeof(float);
    const StoredRun& r = stored_run(x);
    return r.fp32_at + (r.bf16 ? 0 : x - r.begin);
  };
  return int64_t(below(offset + n) - below(offset));
}

void ParameterPlacement::pack_weights(size_t offset, size_t n, const float* values, uint16_t* bf16,
                                      float* fp32) const {
  size_t e = 0;
  for_each_run(offset, n, [&](const StoredRun* r, size_t lo, size_t hi) {
    if (r->bf16) {
      be_->round_to_bf16(bf16 + (lo - offset), values + (lo - offset), hi - lo);
    } else {
      be_->copy(fp32 + e, values + (lo - offset), sizeof(float) * (hi - lo));
      e += hi - lo;
    }
  });
}

void ParameterPlacement::store_packed_weights(size_t offset, size_t n, const uint16_t* bf16,
                                              const float* fp32) {
  ZAYA_CHECK(offset + n <= params_.size(), "ParameterPlacement::store_packed_weights: [", offset,
             ", ", offset + n, ") is outside the ", params_.size(), " parameters");
  auto* w16 = static_cast<uint16_t*>(dev_w16_.get());
  size_t e = 0;
  for_each_run(offset, n, [&](const StoredRun* r, size_t lo, size_t hi) {
    if (r->bf16) {
      be_->copy(w16 + lo, bf16 + (lo - offset), sizeof(uint16_t) * (hi - lo));
    } else {
      be_->copy(dev_w32_.floats() + r->fp32_at + (lo - r->begin), fp32 + e,
                sizeof(float) * (hi - lo));
      e += hi - lo;
    }
  });
}

void ParameterPlacement::push_stored(size_t offset, size_t n) {
  const float* host = params_.weights();
  const size_t chunk = dev_staging_.bytes() / sizeof(float);
  for (size_t at = offset; at < offset + n; at += chunk) {
    const size_t len = std::min(chunk, offset + n - at);
    be_->to_device(dev_staging_.floats(), host + at, sizeof(float) * len);
    store_weights(at, len, dev_staging_.floats());
  }
  const size_t lo = std::max(offset, master_begin_), hi = std::min(offset + n, master_end_);
  if (lo < hi)
    be_->to_device(dev_master_.floats() + (lo - master_begin_), host + lo,
                   sizeof(float) * (hi - lo));
}

void ParameterPlacement::pull_stored() {
  float* host = params_.weights();
  const size_t n = params_.size(), chunk = dev_staging_.bytes() / sizeof(float);
  const auto* w16 = static_cast<const uint16_t*>(dev_w16_.get());
  float* staging = dev_staging_.floats();
  for (size_t at = 0; at < n; at += chunk) {
    const size_t end = std::min(n, at + chunk);
    for_each_run(at, end - at, [&](const StoredRun* r, size_t lo, size_t hi) {
      if (r->bf16)
        be_->widen_bf16(staging + (lo - at), w16 + lo, hi - lo);
      else
        be_->copy(staging + (lo - at), dev_w32_.floats() + r->fp32_at + (lo - r->begin),
                  sizeof(float) * (hi - lo));
    });
    be_->to_host(host + at, staging, sizeof(float) * (end - at));
  }
  // The master range exactly (the bf16 values above are its rounding).
  if (master_end_ > master_begin_)
    be_->to_host(host + master_begin_, dev_master_.floats(),
                 sizeof(float) * (master_end_ - master_begin_));
}

size_t ParameterPlacement::weight_bytes() const {
  if (be_->host_memory()) return 0;
  if (!bf16_weight_storage()) return dev_weights_.bytes();
  return dev_w16_.bytes() + dev_w32_.bytes() + dev_master_.bytes() + dev_staging_.bytes();
}

size_t ParameterPlacement::grad_bytes() const {
  if (be_->host_memory()) return 0;
  return dev_grads_.bytes() + dev_g16_.bytes() + dev_g32_.bytes();
}

}  // namespace zaya
