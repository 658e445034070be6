// The CUDA backend (HIP through vendor.h): the Backend (backend/backend.h) over the ops of
// backend/cuda/ops.h, in device memory. Plain C++: a program compiled by the host compiler uses
// it through cuda_backend().
#pragma once

#include "backend/backend.h"

namespace zaya {

class CudaBackend final : public Backend {
 public:
  // bf16: every op runs under cuda::Bf16Gemms (bf16 GEMM inputs, fp32 accumulation).
  explicit CudaBackend(bool bf16) : bf16_(bf16) {}
  bool bf16() const { return bf16_; }
  const char* name() const override;
  bool host_memory() const override;
  void synchronize() const override;
  bool bf16_weights() const override { return bf16_; }
  void* allocate(size_t bytes) const override;
  void release(void* p) const noexcept override;
  void copy(void* dst, const void* src, size_t bytes) const override;
  void fill_zero(void* dst, size_t bytes) const override;
  void to_device(void* dst, const void* src, size_t bytes) const override;
  // The device's virtual memory (cuda::vm_*; granule 0 where it has none).
  size_t memory_granule() const override;
  void* reserve(size_t bytes) const override;
  void commit(void* p, size_t bytes) const override;
  void decommit(void* p, size_t bytes) const override;
#define ZAYA_BACKEND_OP(ret, name, params, args) ret name params const override;
#include "backend/backend_ops.inc"
#undef ZAYA_BACKEND_OP

 protected:
  void copy_to_host(void* dst, const void* src, size_t bytes) const override;

 private:
  bool bf16_;
};

// The process's CUDA backends on the current device: fp32, and mixed precision with bf16 GEMM
// inputs (cuda::Bf16Gemms). Check cuda::unavailable_reason() first.
const Backend& cuda_backend();
const Backend& cuda_bf16_backend();

}  // namespace zaya
