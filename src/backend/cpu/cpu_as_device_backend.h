// cpu-as-device (backend/device_select.h): the CPU ops on memory the model treats as a device's,
// so that every copy and every resident buffer of --device cuda runs on any machine.
//
// With bf16 weights it also stands in for the bf16 CUDA backend's weights: it says its products
// take bf16 weights (bf16_weights), so the model hands them the bf16 values (a copy rounded once
// per forward, or its bf16 weight storage) and may keep their gradients in bf16; the CPU ops
// widen them (backend/cpu/typed_weights.h). The activations stay fp32 (the CUDA backend rounds
// them too): this is the GPU's memory layout and weight rounding on the CPU, for checking the
// storage's bookkeeping bitwise, not the GPU's numbers. It keeps no state about any model.
#pragma once

#include "backend/cpu/cpu_backend.h"

namespace zaya {

// Its "device memory" is counted, as a GPU's allocator would see it: every allocate and release
// of every cpu-as-device backend in the process, in use now and at most so far
// (cpu_as_device_memory). That is what the memory plan (train/train_memory.h) is held to.
class CpuAsDeviceBackend final : public CpuBackend {
 public:
  explicit CpuAsDeviceBackend(bool bf16_weights = false) : bf16_(bf16_weights) {}
  const char* name() const override { return "cpu-as-device"; }
  bool host_memory() const override { return false; }
  bool bf16_weights() const override { return bf16_; }
  void* allocate(size_t bytes) const override;
  void release(void* p) const noexcept override;
  // A GPU's virtual memory in 2 MiB granules (CUDA's and HIP's usual mapping granularity): a
  // decommitted granule is not counted and is made inaccessible (PROT_NONE), so an op that
  // touches gradient memory ZeRO-2 has not committed faults here as it would on the GPU.
  static constexpr size_t kGranule = size_t(2) << 20;
  size_t memory_granule() const override { return kGranule; }
  void* reserve(size_t bytes) const override;
  void decommit(void* p, size_t bytes) const override;
  void commit(void* p, size_t bytes) const override;

 private:
  bool bf16_;
};

struct CountedMemory {
  // Bytes asked for (each allocation's own count, not rounded), less the granules decommitted.
  size_t used = 0, peak = 0;
};
CountedMemory cpu_as_device_memory();

}  // namespace zaya
