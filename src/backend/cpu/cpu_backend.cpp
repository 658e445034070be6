#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "backend/cpu/activation.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/bf16_ops.h"
#include "backend/cpu/conv.h"
#include "backend/cpu/decode_ops.h"
#include "backend/cpu/lm_head_loss.h"
#include "backend/cpu/loss.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/model_ops.h"
#include "backend/cpu/norm.h"
#include "backend/cpu/optim_ops.h"
#include "backend/cpu/residual.h"
#include "backend/cpu/rope.h"
#include "backend/cpu/rowwise.h"

namespace zaya {

const Backend& cpu_backend() {
  static const CpuBackend backend;
  return backend;
}

const char* CpuBackend::name() const {
  return "cpu";
}

void* CpuBackend::allocate(size_t bytes) const {
  void* p = std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64));
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void CpuBackend::release(void* p) const noexcept {
  std::free(p);
}

void CpuBackend::copy(void* dst, const void* src, size_t bytes) const {
  if (bytes) std::memmove(dst, src, bytes);
}

void CpuBackend::fill_zero(void* dst, size_t bytes) const {
  if (bytes) std::memset(dst, 0, bytes);
}

void CpuBackend::to_device(void* dst, const void* src, size_t bytes) const {
  copy(dst, src, bytes);
}

void CpuBackend::copy_to_host(void* dst, const void* src, size_t bytes) const {
  copy(dst, src, bytes);
}

// Every op forwards to its cpu:: namesake.
#define ZAYA_BACKEND_OP(ret, name, params, args) \
  ret CpuBackend::name params const {            \
    return cpu::name args;                       \
  }
#include "backend/backend_ops.inc"
#undef ZAYA_BACKEND_OP

}  // namespace zaya
