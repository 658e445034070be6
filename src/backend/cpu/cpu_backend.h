// The CPU backend: the Backend (backend/backend.h) over the op set of backend/cpu, in host
// memory. Every op forwards to its cpu:: function unchanged, on the vector path the backend was
// made for (vector_path.h; every path computes the same bits), so a model run through it computes
// bit for bit what the op set computes. (Not final: a test derives a backend of "separate"
// memory from it, tests/unit/test_backend_seam.cpp.)
#pragma once

#include "backend/backend.h"
#include "backend/vector_path.h"

namespace zaya {

namespace cpu {
struct CpuOpTable;
}

class CpuBackend : public Backend {
 public:
  // The ops of `path`, which this binary must carry (built_vector_paths) and this CPU must run
  // (missing_cpu_features): checked by choose_vector_path; throws zaya::Error otherwise.
  explicit CpuBackend(VectorPath path = active_vector_path().path);
  VectorPath vector_path() const { return path_; }
  const char* name() const override;
  bool host_memory() const override { return true; }
  void* allocate(size_t bytes) const override;
  void release(void* p) const noexcept override;
  void copy(void* dst, const void* src, size_t bytes) const override;
  void fill_zero(void* dst, size_t bytes) const override;
  // Host pages: decommit zeroes the partial pages at the ends and gives the whole ones back
  // (they read as zero when next touched, so commit has nothing to do).
  size_t memory_granule() const override;
  void* reserve(size_t bytes) const override;
  void decommit(void* p, size_t bytes) const override;
  void to_device(void* dst, const void* src, size_t bytes) const override;
#define ZAYA_BACKEND_OP(ret, name, params, args) ret name params const override;
#include "backend/backend_ops.inc"
#undef ZAYA_BACKEND_OP

 protected:
  void copy_to_host(void* dst, const void* src, size_t bytes) const override;

 private:
  VectorPath path_;
  const cpu::CpuOpTable* ops_;
};

// The process's CPU backend, on the active vector path (stateless; shared by every model).
const Backend& cpu_backend();
// The CPU backend of one path (tests and benchmarks compare the paths side by side).
const Backend& cpu_backend(VectorPath path);

}  // namespace zaya
