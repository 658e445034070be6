#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cstddef>
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

namespace {

// Large fills and copies (a step's gradients, activations) in pieces over the threads; below
// kParallelBytes one call (a parallel region costs more than it saves).
constexpr size_t kParallelBytes = size_t(1) << 20;
constexpr size_t kPiece = size_t(256) << 10;

template <class Fn>
void in_pieces(size_t bytes, Fn&& fn) {
  const auto pieces = static_cast<long>((bytes + kPiece - 1) / kPiece);
#pragma omp parallel for schedule(static)
  for (long i = 0; i < pieces; ++i) {
    const size_t at = size_t(i) * kPiece;
    fn(at, std::min(kPiece, bytes - at));
  }
}

}  // namespace

void CpuBackend::copy(void* dst, const void* src, size_t bytes) const {
  if (bytes == 0) return;
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  // Overlapping ranges keep memmove's one call.
  if (bytes < kParallelBytes || (d < s + bytes && s < d + bytes)) {
    std::memmove(dst, src, bytes);
    return;
  }
  in_pieces(bytes, [&](size_t at, size_t n) { std::memcpy(d + at, s + at, n); });
}

void CpuBackend::fill_zero(void* dst, size_t bytes) const {
  if (bytes == 0) return;
  if (bytes < kParallelBytes) {
    std::memset(dst, 0, bytes);
    return;
  }
  auto* d = static_cast<std::byte*>(dst);
  in_pieces(bytes, [&](size_t at, size_t n) { std::memset(d + at, 0, n); });
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
