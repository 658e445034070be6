// The CUDA backend (HIP through vendor.h): the Backend (backend/backend.h) over the ops of
// backend/cuda/ops.h, in device memory. Plain C++: a program compiled by the host compiler uses
// it through cuda_backend().
#pragma once

#include "backend/backend.h"

namespace zaya {

class CudaBackend final : public Backend {
 public:
  const char* name() const override;
  bool host_memory() const override;
  void* allocate(size_t bytes) const override;
  void release(void* p) const noexcept override;
  void copy(void* dst, const void* src, size_t bytes) const override;
  void fill_zero(void* dst, size_t bytes) const override;
  void to_device(void* dst, const void* src, size_t bytes) const override;
  void to_host(void* dst, const void* src, size_t bytes) const override;
#define ZAYA_BACKEND_OP(ret, name, params, args) ret name params const override;
#include "backend/backend_ops.inc"
#undef ZAYA_BACKEND_OP
};

// The process's CUDA backend (the current device). Check cuda::unavailable_reason() first.
const Backend& cuda_backend();

}  // namespace zaya
