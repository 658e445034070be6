// The CPU backend: the Backend (backend/backend.h) over the op set of backend/cpu, in host
// memory. Every op forwards to its cpu:: function unchanged, so a model run through it computes
// bit for bit what the op set computes. (Not final: a test derives a backend of "separate"
// memory from it, tests/unit/test_backend_seam.cpp.)
#pragma once

#include "backend/backend.h"

namespace zaya {

class CpuBackend : public Backend {
 public:
  const char* name() const override;
  bool host_memory() const override { return true; }
  void* allocate(size_t bytes) const override;
  void release(void* p) const noexcept override;
  void copy(void* dst, const void* src, size_t bytes) const override;
  void fill_zero(void* dst, size_t bytes) const override;
  void to_device(void* dst, const void* src, size_t bytes) const override;
#define ZAYA_BACKEND_OP(ret, name, params, args) ret name params const override;
#include "backend/backend_ops.inc"
#undef ZAYA_BACKEND_OP

 protected:
  void copy_to_host(void* dst, const void* src, size_t bytes) const override;
};

// The process's CPU backend (stateless; shared by every model).
const Backend& cpu_backend();

}  // namespace zaya
