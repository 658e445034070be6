// Deterministic column reductions, the pattern behind every bias/scale/norm-weight gradient.
#pragma once

#include "backend/cpu/cpu_path_target.h"

namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

// out[j] = Σ_i a[i,j] · (b ? b[i,j] + (b_shift ? b_shift[j] : 0) : 1) · (row_scale ? row_scale[i] :
// 1) over rows i of [n, c] matrices. Rows are summed in fixed chunks whose partial sums are added
// in chunk order, so the result is bitwise the same for any thread count, while each chunk walks
// memory row by row (vectorised) instead of striding down columns.
void column_dot(double* out, const float* a, const float* b, const float* b_shift,
                const float* row_scale, int n, int c);

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
