// Timings of the device itself, for `zaya bench gemm|membw --device cuda` (issue 15's sizing
// rules come from them). Plain C++: the plugin's table (plugin_api.h) points at these.
#pragma once

#include <cstddef>

namespace zaya::cuda {

// Seconds per product C[m, n] = op(A) · op(B) (row-major; A is [m, k], or [k, m] with trans_a;
// B is [k, n], or [n, k] with trans_b) through cuBLASLt: fp32 inputs and output computed in fp32
// (no TF32), or bf16 inputs and output with fp32 accumulation. One warm-up call, then `reps`
// calls between two events.
double time_gemm(int m, int n, int k, bool trans_a, bool trans_b, bool bf16, int reps);

// Seconds of one STREAM kernel over arrays of n floats in device memory, STREAM's kernels: 0 copy
// (c = a), 1 scale (b = q·c), 2 add (c = a + b), 3 triad (a = b + q·c). The arrays are made once;
// after a warm-up, the fastest of `runs` launches, each between its own events (STREAM's rule).
double time_stream_kernel(int kernel, size_t n, int runs);

// Device memory in use now (total minus free) and in all, in bytes.
void device_memory(size_t* used, size_t* total, size_t* peak);

}  // namespace zaya::cuda
