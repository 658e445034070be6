// Where the parameters live (parameter_placement.h): the host's ParamStore, its copies in a
// backend's memory, and the bf16 weight storage (the flat parameters as runs of bf16 and fp32
// tensors, model/bf16_split.h; the typed weights the ops read; and the moves between the host's
// fp32 copy and the backend's buffers).
#include <algorithm>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "model/parameter_placement.h"

namespace zaya {

ParameterPlacement::ParameterPlacement(const ModelConfig& config)
    : params_(config), be_(&cpu_backend()) {}

void ParameterPlacement::set_backend(const Backend& backend) {
  be_ = &backend;
  // The old buffers go first, so that the new ones never sit beside them.
  release_device_parameters();
  if (!backend.host_memory()) {
    const size_t bytes = sizeof(float) * params_.size();
    if (backend.bf16_weights())
      split_ = Bf16Split(params_.registry(), bf16_storage_wanted_ && bf16_grads_wanted_);
    if (bf16_storage_wanted_ && backend.bf16_weights()) {
      if (!bf16_grads_wanted_) dev_grads_ = grad_buffer(bytes);
      lay_out_bf16_storage();  // the weights come with the next push
    } else {
      dev_grads_ = grad_buffer(bytes);
      dev_weights_ = BackendBuffer(backend, bytes);
      // The products' bf16 copy (round_product_weights fills it).
      if (backend.bf16_weights())
        dev_w16_ = BackendBuffer(backend, sizeof(uint16_t) * params_.size());
    }
  }
  layout_changed();
  if (!backend.host_memory() && resident_) set_resident(true);  // the new memory gets the weights
}

void ParameterPlacement::release_device_parameters() {
  for (BackendBuffer* b :
       {&dev_weights_, &dev_grads_, &dev_w16_, &dev_w32_, &dev_staging_, &dev_g16_, &dev_g32_})
    b->reset();
  split_ = Bf16Split();
  stored_ = false;
}

void ParameterPlacement::set_resident(bool resident) {
  resident_ = resident;
  if (!this->resident()) return;
  push_weights();
  zero_grads();
  // The host's gradients go unused while the backend keeps its own: their pages go back to the
  // system (they read as zero, and come back if anything writes them).
  cpu_backend().decommit(params_.grads(), sizeof(float) * params_.size());
}

void ParameterPlacement::zero_grads() {
  if (on_demand_) {
    decommit_grads(0, params_.size());
    return;
  }
  if (bf16_gradients()) {
    be_->fill_zero(dev_g16_.get(), dev_g16_.bytes());
    be_->fill_zero(dev_g32_.get(), dev_g32_.bytes());
  } else if (resident()) {
    be_->fill_zero(dev_grads_.floats(), dev_grads_.bytes());
  } else {
    params_.zero_grads();
  }
}

BackendBuffer ParameterPlacement::grad_buffer(size_t bytes) const {
  return on_demand_ ? BackendBuffer::reserved(*be_, bytes) : BackendBuffer(*be_, bytes);
}

void ParameterPlacement::set_gradients_on_demand(bool on) {
  if (on == on_demand_) return;
  on_demand_ = on;
  if (!be_->host_memory())
    set_backend(*be_);  // the gradient buffers again, reserved or whole
  else if (on)
    zero_grads();
}

template <class Fn>
void ParameterPlacement::for_each_grad_stretch(size_t offset, size_t n, Fn&& fn) {
  ZAYA_CHECK(offset + n <= params_.size(), "ParameterPlacement: gradients [", offset, ", ",
             offset + n, ") are outside the ", params_.size(), " parameters");
  if (n == 0) return;
  if (!bf16_gradients()) {
    fn(static_cast<void*>(grads_base() + offset), sizeof(float) * n);
    return;
  }
  auto* g16 = static_cast<uint16_t*>(dev_g16_.get());
  split_.for_each_run(offset, n, [&](const StorageRun& r, size_t lo, size_t hi) {
    if (r.bf16_grads)
      fn(static_cast<void*>(g16 + lo), sizeof(uint16_t) * (hi - lo));
    else
      fn(static_cast<void*>(dev_g32_.floats() + r.grad_fp32_at + (lo - r.begin)),
         sizeof(float) * (hi - lo));
  });
}

void ParameterPlacement::commit_grads(size_t offset, size_t n) {
  if (!on_demand_) return;
  for_each_grad_stretch(offset, n, [&](void* p, size_t bytes) { be_->commit(p, bytes); });
}

void ParameterPlacement::decommit_grads(size_t offset, size_t n) {
  for_each_grad_stretch(offset, n, [&](void* p, size_t bytes) {
    if (on_demand_)
      be_->decommit(p, bytes);
    else
      be_->fill_zero(p, bytes);
  });
}

float* ParameterPlacement::backend_grads() {
  ZAYA_CHECK(!bf16_gradients(),
             "ParameterPlacement::backend_grads: with bf16 gradients the gradients are not one "
             "fp32 buffer (load_grads())");
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
      "buffer (store_weights())");
  return const_cast<float*>(weights_base());
}

const float* ParameterPlacement::weights_base() const {
  return be_->host_memory() ? params_.weights() : dev_weights_.floats();
}

float* ParameterPlacement::grads_base() {
  return be_->host_memory() ? params_.grads() : dev_grads_.floats();
}

void ParameterPlacement::set_bf16_weight_storage(bool bf16_gradients) {
  bf16_storage_wanted_ = true;
  bf16_grads_wanted_ = bf16_gradients;
  // On a backend that takes it, lay it out now and fill it from the host copy of the weights
  // (set_backend does when the parameters are resident).
  if (!be_->host_memory() && be_->bf16_weights()) {
    set_backend(*be_);
    if (!resident_) push_weights();
  }
}

void ParameterPlacement::lay_out_bf16_storage() {
  const size_t n = params_.size();
  stored_ = true;
  // The bf16 buffer keeps the flat layout (a weight's bf16 value at its flat offset); the slots
  // of the fp32 tensors in it go unused, a few per mille of it.
  dev_w16_ = BackendBuffer(*be_, sizeof(uint16_t) * n);
  dev_w32_ = BackendBuffer(*be_, sizeof(float) * split_.fp32_floats());
  dev_staging_ = BackendBuffer(*be_, sizeof(float) * std::min(n, kStagingFloats));
  if (bf16_grads_wanted_) {  // no full fp32 gradients (set_backend made none): two kinds
    dev_g16_ = grad_buffer(sizeof(uint16_t) * n);
    dev_g32_ = grad_buffer(sizeof(float) * split_.grad_fp32_floats());
  }
}

void ParameterPlacement::round_product_weights() {
  if (!bf16_products() || bf16_weight_storage()) return;
  auto* w16 = static_cast<uint16_t*>(dev_w16_.get());
  split_.for_each_run(0, params_.size(), [&](const StorageRun& r, size_t lo, size_t hi) {
    if (r.bf16) be_->round_to_bf16(w16 + lo, dev_weights_.floats() + lo, hi - lo);
  });
}

WeightRef ParameterPlacement::weight(size_t offset) const {
  if (!bf16_products()) return weights_base() + offset;
  if (split_.run_at(offset).bf16)
    return WeightRef::bf16(static_cast<const uint16_t*>(dev_w16_.get()) + offset);
  return fp32_weight(offset);
}

const float* ParameterPlacement::fp32_weight(size_t offset) const {
  if (!bf16_weight_storage()) return weights_base() + offset;
  const StorageRun& r = split_.run_at(offset);
  ZAYA_CHECK(!r.bf16, "the weight at flat offset ", offset,
             " is kept in bf16 alone (bf16 weight storage): there is no fp32 value to read");
  return dev_w32_.floats() + r.fp32_at + (offset - r.begin);
}

GradRef ParameterPlacement::grad(size_t offset) {
  if (!bf16_gradients()) return grads_base() + offset;
  if (split_.run_at(offset).bf16_grads)
    return GradRef::bf16(static_cast<uint16_t*>(dev_g16_.get()) + offset);
  return fp32_grad(offset);
}

float* ParameterPlacement::fp32_grad(size_t offset) {
  if (!bf16_gradients()) return grads_base() + offset;
  const StorageRun& r = split_.run_at(offset);
  ZAYA_CHECK(!r.bf16_grads, "the gradient at flat offset ", offset,
             " is kept in bf16 (bf16 gradients): there is no fp32 value to add into");
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
  split_.for_each_run(offset, n, [&](const StorageRun& r, size_t lo, size_t hi) {
    if (r.bf16_grads)
      be_->widen_bf16(dst + (lo - offset), g16 + lo, hi - lo);
    else
      be_->copy(dst + (lo - offset), dev_g32_.floats() + r.grad_fp32_at + (lo - r.begin),
                sizeof(float) * (hi - lo));
  });
}

void ParameterPlacement::fill_grads(float value) {
  commit_grads(0, params_.size());
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
  split_.for_each_run(offset, n, [&](const StorageRun& r, size_t lo, size_t hi) {
    if (r.bf16)
      be_->round_to_bf16(w16 + lo, values + (lo - offset), hi - lo);
    else
      be_->copy(dev_w32_.floats() + r.fp32_at + (lo - r.begin), values + (lo - offset),
                sizeof(float) * (hi - lo));
  });
}

void ParameterPlacement::store_bf16_weights(size_t offset, size_t n, const uint16_t* values) {
  ZAYA_CHECK(bf16_weight_storage(),
             "ParameterPlacement::store_bf16_weights needs bf16 weight storage");
  ZAYA_CHECK(offset + n <= params_.size(), "ParameterPlacement::store_bf16_weights: [", offset,
             ", ", offset + n, ") is outside the ", params_.size(), " parameters");
  auto* w16 = static_cast<uint16_t*>(dev_w16_.get());
  split_.for_each_run(offset, n, [&](const StorageRun& r, size_t lo, size_t hi) {
    ZAYA_CHECK(r.bf16, "ParameterPlacement::store_bf16_weights: flat [", lo, ", ", hi,
               ") holds fp32 tensors");
    be_->copy(w16 + lo, values + (lo - offset), sizeof(uint16_t) * (hi - lo));
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
}

void ParameterPlacement::pull_stored() {
  float* host = params_.weights();
  const size_t n = params_.size(), chunk = dev_staging_.bytes() / sizeof(float);
  const auto* w16 = static_cast<const uint16_t*>(dev_w16_.get());
  float* staging = dev_staging_.floats();
  for (size_t at = 0; at < n; at += chunk) {
    const size_t end = std::min(n, at + chunk);
    split_.for_each_run(at, end - at, [&](const StorageRun& r, size_t lo, size_t hi) {
      if (r.bf16)
        be_->widen_bf16(staging + (lo - at), w16 + lo, hi - lo);
      else
        be_->copy(staging + (lo - at), dev_w32_.floats() + r.fp32_at + (lo - r.begin),
                  sizeof(float) * (hi - lo));
    });
    be_->to_host(host + at, staging, sizeof(float) * (end - at));
  }
}

size_t ParameterPlacement::weight_bytes() const {
  if (be_->host_memory()) return 0;
  if (!bf16_weight_storage()) return dev_weights_.bytes() + dev_w16_.bytes();  // and the copy
  return dev_w16_.bytes() + dev_w32_.bytes() + dev_staging_.bytes();
}

size_t ParameterPlacement::grad_bytes() const {
  if (be_->host_memory()) return 0;
  return dev_grads_.bytes() + dev_g16_.bytes() + dev_g32_.bytes();
}

}  // namespace zaya
