// Partial rotary position embedding (NeoX rotate-half) over the first `rot` dims of each head.
#pragma once

#include "backend/cpu/cpu_path_target.h"

#include "backend/rope_tables.h"  // the tables rope_apply reads

namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

// In place on x[batch, seq, heads, d]: for i < rot/2, with x1 = x[i], x2 = x[i + rot/2],
//   x1' = x1 cos − x2 sin,  x2' = x2 cos + x1 sin.   Dims rot..d-1 pass through.
// The rotation is orthogonal, so backward is the same call with inverse = true on the gradient.
void rope_apply(float* x, const float* cos_t, const float* sin_t, int batch, int seq, int heads,
                int d, int rot, bool inverse);

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
