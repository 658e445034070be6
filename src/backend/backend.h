// The seam under the model (docs/gpu.md, "The seam"): every computation of a training step is
// an op of a Backend, so the model's orchestration (model/zaya_model, cca, moe, ring_attention)
// is written once and runs on any backend. The conventions are the CPU op set's
// (backend/cpu/*.h), which is the oracle every backend is held to: row-major plain buffers in the
// backend's memory; `*_forward` overwrites its outputs; `*_backward` ADDS into the gradients it
// is given and skips nullptr ones.
//
// Where the host must read a value the ops computed (the experts' row offsets, the loss), the
// op says so or the model calls to_host: each such read is an explicit copy, visible at its call
// site. Three implement it: CpuBackend (backend/cpu/cpu_backend.h, host memory), cpu-as-device
// (backend/cpu/cpu_as_device_backend.h: the CPU ops on memory the model treats as a device's) and
// CudaBackend (backend/cuda/cuda_backend.h, device memory), which `zaya` loads from the CUDA
// plugin (backend/plugin_api.h) for --device cuda; backend/device_select.h picks one.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "backend/op_types.h"
#include "backend/optim_types.h"
#include "backend/weight_ref.h"
#include "core/arena.h"
#include "core/error.h"

namespace zaya {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

  // Memory. host_memory(): the backend computes on host memory (the model then works on its
  // ParamStore directly); otherwise the model keeps device copies (model/zaya_model.h).
  // allocate returns at least 64-byte aligned memory of the backend's; to_device/to_host cross
  // between host memory and the backend's.
  virtual bool host_memory() const = 0;
  virtual void* allocate(size_t bytes) const = 0;
  virtual void release(void* p) const noexcept = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) const = 0;
  virtual void fill_zero(void* dst, size_t bytes) const = 0;
  virtual void to_device(void* dst, const void* src, size_t bytes) const = 0;
  // A copy to the host is a synchronisation point on a GPU (the host waits for the device), so
  // every one the model makes goes through here and is counted: the experts' row counts once
  // per MoE stage in the forward, the gradients once per backward, logits and routes on request.
  // (Ops that return a value, like the loss, read it back inside the op.)
  void to_host(void* dst, const void* src, size_t bytes) const {
    host_reads_.fetch_add(1, std::memory_order_relaxed);
    host_read_bytes_.fetch_add(int64_t(bytes), std::memory_order_relaxed);
    copy_to_host(dst, src, bytes);
  }
  // Memory taken and given back while a step runs (ZeRO-2's gradients, optim/zero2_reduce.h), as
  // a GPU's virtual memory maps it: in granules of memory_granule() bytes (aligned). reserve:
  // like allocate, but every whole granule inside starts given back. decommit: the values of
  // [p, p + bytes) are no longer needed: nothing reads or writes them until commit, and the whole
  // granules inside go back to the system. commit: [p, p + bytes) is about to be read or written:
  // the granules it touches that were given back are taken again, reading as zero (so is the
  // rest of a decommitted range). A backend that cannot give memory back (granule 0) zeroes on
  // decommit and needs no commit.
  virtual size_t memory_granule() const { return 0; }
  virtual void* reserve(size_t bytes) const {
    void* p = allocate(bytes);
    fill_zero(p, bytes);
    return p;
  }
  virtual void decommit(void* p, size_t bytes) const { fill_zero(p, bytes); }
  virtual void commit(void* /*p*/, size_t /*bytes*/) const {}
  // Waits until the backend's queued work is done (timings; a no-op where ops run synchronously).
  virtual void synchronize() const {}
  // Whether the products compute on bf16 weights (the bf16 CUDA backend, cpu-as-device's bf16
  // mode): the model then hands them bf16 weights (WeightRef::bf16), either a copy it rounds once
  // per forward from its fp32 weights or its bf16 weight storage, and may keep the products'
  // weight gradients in bf16 (GradRef::bf16). Every backend takes fp32 weights; one without this
  // capability refuses bf16 ones. The backend keeps no state about the weights: each op is told.
  virtual bool bf16_weights() const { return false; }
  // Counts of to_host since the process started (all threads).
  int64_t host_reads() const { return host_reads_.load(std::memory_order_relaxed); }
  int64_t host_read_bytes() const { return host_read_bytes_.load(std::memory_order_relaxed); }

  // The ops, with the CPU op set's conventions (backend_ops.inc lists them).
#define ZAYA_BACKEND_OP(ret, name, params, args) virtual ret name params const = 0;
#include "backend/backend_ops.inc"
#undef ZAYA_BACKEND_OP

 protected:
  virtual void copy_to_host(void* dst, const void* src, size_t bytes) const = 0;

 private:
  mutable std::atomic<int64_t> host_reads_{0}, host_read_bytes_{0};
};

// Memory of a backend, released with the object (move-only).
class BackendBuffer {
 public:
  BackendBuffer() = default;
  BackendBuffer(const Backend& be, size_t bytes)
      : be_(&be), p_(bytes ? be.allocate(bytes) : nullptr), bytes_(bytes) {}
  // Backend::reserve's memory: taken granule by granule as it is committed.
  static BackendBuffer reserved(const Backend& be, size_t bytes) {
    BackendBuffer b;
    b.be_ = &be;
    b.p_ = bytes ? be.reserve(bytes) : nullptr;
    b.bytes_ = bytes;
    return b;
  }
  BackendBuffer(BackendBuffer&& o) noexcept : be_(o.be_), p_(o.p_), bytes_(o.bytes_) {
    o.p_ = nullptr;
    o.bytes_ = 0;
  }
  BackendBuffer& operator=(BackendBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      be_ = o.be_;
      p_ = o.p_;
      bytes_ = o.bytes_;
      o.p_ = nullptr;
      o.bytes_ = 0;
    }
    return *this;
  }
  BackendBuffer(const BackendBuffer&) = delete;
  BackendBuffer& operator=(const BackendBuffer&) = delete;
  ~BackendBuffer() { reset(); }
  void reset() {
    if (p_) be_->release(p_);
    p_ = nullptr;
    bytes_ = 0;
  }
  float* floats() const { return static_cast<float*>(p_); }
  void* get() const { return p_; }
  size_t bytes() const { return bytes_; }

 private:
  const Backend* be_ = nullptr;
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// An arena's blocks in a backend's memory (core/arena.h): the model's activations, a decoder's
// per-step buffers.
class BackendArenaMemory final : public ArenaMemory {
 public:
  explicit BackendArenaMemory(const Backend& be) : be_(be) {}
  void* allocate(size_t bytes) override { return be_.allocate(bytes); }
  void release(void* p) noexcept override { be_.release(p); }
  void zero(void* p, size_t bytes) override { be_.fill_zero(p, bytes); }

 private:
  const Backend& be_;
};

}  // namespace zaya
