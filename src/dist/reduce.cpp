#include "dist/reduce.h"

#include <algorithm>
#include <cstdint>

#include "core/error.h"

namespace zaya::dist {

namespace {

template <typename T>
T combine(T a, T b, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return a + b;
    case ReduceOp::Max:
      return std::max(a, b);
    case ReduceOp::Min:
      return std::min(a, b);
  }
  return a;
}

// Signed overflow is undefined behaviour; integer sums wrap instead, as NCCL's do.
int32_t combine_i32(int32_t a, int32_t b, ReduceOp op) {
  if (op == ReduceOp::Sum) return int32_t(uint32_t(a) + uint32_t(b));
  return combine(a, b, op);
}

}  // namespace

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
  }
  return "?";
}

void reduce_into(void* dst, const void* src, size_t count, DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::F32: {
      auto* d = static_cast<float*>(dst);
      const auto* s = static_cast<const float*>(src);
      for (size_t i = 0; i < count; ++i) d[i] = combine(d[i], s[i], op);
      return;
    }
    case DType::I32: {
      auto* d = static_cast<int32_t*>(dst);
      const auto* s = static_cast<const int32_t*>(src);
      for (size_t i = 0; i < count; ++i) d[i] = combine_i32(d[i], s[i], op);
      return;
    }
    case DType::BF16: {
      // Each partial result is rounded back to bf16, as a bf16 wire format would carry it.
      auto* d = static_cast<uint16_t*>(dst);
      const auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < count; ++i)
        d[i] = f32_to_bf16(combine(bf16_to_f32(d[i]), bf16_to_f32(s[i]), op));
      return;
    }
  }
  ZAYA_FAIL("reduce: unsupported dtype ", int(dtype));
}

}  // namespace zaya::dist
