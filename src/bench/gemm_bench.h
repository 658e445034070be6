// `zaya bench gemm`: throughput of the CPU backend's matrix product (backend/cpu/matmul.h, the one
// every layer calls) over a sweep of sizes, a grid for hardware profiles, or the exact products of
// a model config.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "model/model_gemms.h"

namespace zaya {

struct GemmTiming {
  GemmShape shape;
  double seconds = 0;  // per call, the best of 3 timed batches
  double gflops() const { return shape.flops() / seconds * 1e-9; }
};

// Best-of-3 time per call of batches lasting at least min_time / 3 s each, on random inputs.
GemmTiming time_gemm(const GemmShape& shape, double min_time_s);

// Square sizes 32…4096 and unaligned neighbours of the aligned ones: where throughput falls off.
std::vector<GemmShape> gemm_sweep();
// Every M, N, K in {16, 64, 256, 1024, 4096}, NN: the curve that `zaya size` interpolates.
std::vector<GemmShape> gemm_grid();
// "MxNxK,MxNxK,..." (NN products); errors name the bad entry.
std::vector<GemmShape> parse_gemm_list(const std::string& text);

// Times one shape: seconds per call given a budget of min_time_s seconds of timed calls.
using GemmTimer = std::function<GemmTiming(const GemmShape& shape, double min_time_s)>;

// Prints the table (with the share of the total time and the micro-batch's total when
// `model_total` is set) and returns the timings; `timer` defaults to time_gemm (the CPU's
// product), `zaya bench gemm --device cuda` passes the GPU's.
std::vector<GemmTiming> run_gemm_bench(const std::vector<GemmShape>& shapes, double min_time_s,
                                       bool model_total, bool progress, std::FILE* out,
                                       const GemmTimer& timer = nullptr);

}  // namespace zaya
