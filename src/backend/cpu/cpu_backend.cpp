#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>

#include "backend/cpu/cpu_op_table.h"
#include "backend/cpu/memory_granules.h"
#include "core/error.h"

namespace zaya {

// The op tables of the path compiles (cpu_op_table.cpp compiled per path, CMakeLists.txt).
#if defined(ZAYA_CPU_PATH_CLONE_AVX2)
namespace cpu::avx2 {
const CpuOpTable& op_table();
}
#endif
#if defined(ZAYA_CPU_PATH_CLONE_AVX512)
namespace cpu::avx512 {
const CpuOpTable& op_table();
}
#endif

namespace {

// The table of `path`: the plain compile's when it is the build's own level, else the path
// compile's. Null when the binary does not carry the path.
const cpu::CpuOpTable* op_table_of(VectorPath path) {
  if (path == own_vector_path()) return &cpu::op_table();
#if defined(ZAYA_CPU_PATH_CLONE_AVX2)
  if (path == VectorPath::kAvx2) return &cpu::avx2::op_table();
#endif
#if defined(ZAYA_CPU_PATH_CLONE_AVX512)
  if (path == VectorPath::kAvx512) return &cpu::avx512::op_table();
#endif
  return nullptr;
}

}  // namespace

CpuBackend::CpuBackend(VectorPath path) : path_(path), ops_(op_table_of(path)) {
  if (ops_ == nullptr)
    ZAYA_FAIL("the CPU backend's ", vector_path_name(path),
              " vector path is not in this binary (it carries ", built_vector_paths_text(), ")");
  const std::string missing = missing_cpu_features(path);
  if (!missing.empty())
    ZAYA_FAIL("the CPU backend's ", vector_path_name(path), " vector path needs ", missing,
              ", which this CPU lacks");
}

const Backend& cpu_backend(VectorPath path) {
  switch (path) {
    case VectorPath::kAvx512: {
      static const CpuBackend backend(VectorPath::kAvx512);
      return backend;
    }
    case VectorPath::kAvx2: {
      static const CpuBackend backend(VectorPath::kAvx2);
      return backend;
    }
    case VectorPath::kBaseline:
      break;
  }
  static const CpuBackend backend(VectorPath::kBaseline);
  return backend;
}

const Backend& cpu_backend() {
  return cpu_backend(active_vector_path().path);
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

size_t CpuBackend::memory_granule() const {
  return cpu::host_page_bytes();
}

void* CpuBackend::reserve(size_t bytes) const {
  void* p = allocate(bytes);
  decommit(p, bytes);
  return p;
}

void CpuBackend::decommit(void* p, size_t bytes) const {
  const cpu::GranuleSpan pages = cpu::whole_granules(p, bytes, memory_granule());
  if (pages.bytes() == 0 || !cpu::give_back_pages(pages.begin, pages.bytes())) {
    fill_zero(p, bytes);
    return;
  }
  auto* lo = static_cast<std::byte*>(p);
  auto* begin = reinterpret_cast<std::byte*>(pages.begin);
  auto* end = reinterpret_cast<std::byte*>(pages.end);
  fill_zero(lo, size_t(begin - lo));
  fill_zero(end, size_t(lo + bytes - end));
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

// Every op forwards to its cpu:: namesake, the path's.
#define ZAYA_BACKEND_OP(ret, name, params, args) \
  ret CpuBackend::name params const {            \
    return ops_->name args;                      \
  }
#include "backend/backend_ops.inc"
#undef ZAYA_BACKEND_OP

}  // namespace zaya
