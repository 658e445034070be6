#include "backend/cuda/cuda_backend.h"

#include "backend/cuda/device.h"
#include "backend/cuda/op_profile.h"
#include "backend/cuda/ops.h"

namespace zaya {

const Backend& cuda_backend() {
  static const CudaBackend backend(false);
  return backend;
}

const Backend& cuda_bf16_backend() {
  static const CudaBackend backend(true);
  return backend;
}

const char* CudaBackend::name() const {
  return "cuda";
}

bool CudaBackend::host_memory() const {
  return false;
}

void CudaBackend::synchronize() const {
  cuda::synchronize();
}

void* CudaBackend::allocate(size_t bytes) const {
  return cuda::device_alloc(bytes);  // cudaMalloc: 256-byte aligned
}

void CudaBackend::release(void* p) const noexcept {
  if (!cuda::vm_release(p)) cuda::device_free(p);
}

size_t CudaBackend::memory_granule() const {
  return cuda::vm_granule();
}

void* CudaBackend::reserve(size_t bytes) const {
  return cuda::vm_granule() > 0 ? cuda::vm_reserve(bytes) : Backend::reserve(bytes);
}

void CudaBackend::commit(void* p, size_t bytes) const {
  if (cuda::vm_granule() > 0) cuda::vm_commit(p, bytes);
}

void CudaBackend::decommit(void* p, size_t bytes) const {
  if (cuda::vm_granule() > 0)
    cuda::vm_decommit(p, bytes);
  else
    fill_zero(p, bytes);
}

void CudaBackend::copy(void* dst, const void* src, size_t bytes) const {
  const cuda::OpTimer timer(cuda::ProfileKind::Op, "copy");
  cuda::copy_on_device(dst, src, bytes);
}

void CudaBackend::fill_zero(void* dst, size_t bytes) const {
  const cuda::OpTimer timer(cuda::ProfileKind::Op, "fill_zero");
  if (bytes) cuda::fill_zero(dst, bytes);
}

void CudaBackend::to_device(void* dst, const void* src, size_t bytes) const {
  const cuda::OpTimer timer(cuda::ProfileKind::Op, "to_device");
  if (bytes) cuda::copy_to_device(dst, src, bytes);
}

void CudaBackend::copy_to_host(void* dst, const void* src, size_t bytes) const {
  const cuda::OpTimer timer(cuda::ProfileKind::Op, "to_host");
  if (bytes) cuda::copy_to_host(dst, src, bytes);
}

// Every op forwards to its cuda:: namesake, in the backend's GEMM precision (timed under
// ZAYA_CUDA_OP_PROFILE, op_profile.h).
#define ZAYA_BACKEND_OP(ret, name, params, args)             \
  ret CudaBackend::name params const {                       \
    const cuda::OpTimer timer(cuda::ProfileKind::Op, #name); \
    const cuda::Bf16Gemms gemm_precision(bf16_);             \
    return cuda::name args;                                  \
  }
#include "backend/backend_ops.inc"
#undef ZAYA_BACKEND_OP

}  // namespace zaya
