// The addresses that stand for stored bf16 values (Backend::set_stored_bf16_weights and
// set_stored_bf16_gradients): each backend asks where an operand lies among them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zaya {

// The index of [p, p + count)'s first element among the fp32 addresses [base, base + n), or -1
// when it is not wholly inside them (or base is null). Compared as integers: the addresses are
// reserved, with no memory behind them, so pointer arithmetic across them would mean nothing.
inline int64_t stored_index(const void* p, size_t count, const void* base, size_t n) {
  const auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(base);
  if (base == nullptr || p == nullptr || a < b || a - b + count * sizeof(float) > n * sizeof(float))
    return -1;
  return int64_t((a - b) / sizeof(float));
}

}  // namespace zaya
