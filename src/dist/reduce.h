// Element-wise reduction shared by the communicators: dst = dst (op) src over `count` elements.
// Implementations call it for contributions in rank order, which is what makes sums reproducible.
#pragma once

#include <cstddef>

#include "dist/communicator.h"

namespace zaya::dist {

void reduce_into(void* dst, const void* src, size_t count, DType dtype, ReduceOp op);

}  // namespace zaya::dist
