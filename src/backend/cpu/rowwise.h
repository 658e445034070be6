// Batch-invariant products for decoding. A decode step multiplies the rows of many sequences by the
// same weights; cpu::matmul_forward (OpenBLAS) rounds a row differently depending on how many rows
// the call has and where the row sits among them, so a sequence's tokens would depend on which
// other sequences happened to share its step. Here every output element is one dot product in a
// fixed order (16 running sums over k mod 16, then the tail, then a fixed pairwise tree), computed
// by the same instructions whatever the number of rows, the row's place and the thread count:
// a sequence decodes to the same bits alone or in a batch of any size.
#pragma once

#include "backend/cpu/cpu_path_target.h"

namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

// out[n, m] = in[n, k] · w[m, k]ᵀ (+ bias[m]), each row independent of the others (see above).
// The weights are read once per call: every block of weight rows meets every input row while it
// is in cache, which is what makes a batch of decode rows cheaper than the rows one at a time.
void rows_matmul_forward(float* out, const float* in, const float* w, const float* bias, int n,
                         int k, int m);

// Several products over consecutive row ranges: rows [offsets[g], offsets[g + 1]) of `in` and
// `out` times weights[g] ([m, k], no bias), each row's results the bits rows_matmul_forward gives
// it. One parallel region holds every group's blocks of weight rows: a decode step's experts get
// a row or two each, too little to wake the threads for one expert at a time, while together
// they are most of the step's weights. `weights` and `offsets` are host memory.
void grouped_rows_matmul_forward(float* out, const float* in, const float* const* weights,
                                 const int* offsets, int groups, int k, int m);

// The fixed-order dot product every output element of rows_matmul_forward is.
float fixed_order_dot(const float* a, const float* b, int k);

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
