// `zaya bench comm`: nccl-tests-style bandwidth of the Communicator's collectives, so the same
// table measures MPI over host memory and NCCL over GPU memory. Every rank runs it; rank 0
// prints.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/tensor.h"
#include "dist/communicator.h"

namespace zaya {

struct CommBenchOptions {
  size_t min_bytes = 8;
  size_t max_bytes = size_t(64) << 20;
  double factor = 2;
  int iters = 20;
  int warmup = 5;
  int check = 1;  // 1: verify every size once after timing, as nccl-tests -c 1
  DType dtype = DType::F32;
  std::vector<std::string> ops = {"all_reduce", "reduce_scatter", "all_gather", "broadcast"};
};

// "8", "64K", "64M", "1G" (binary multiples, as nccl-tests); `flag` names the option in errors.
size_t parse_byte_size(const std::string& text, const char* flag);
// "float"/"f32", "bfloat16"/"bf16", "int32"/"i32".
DType parse_comm_dtype(const std::string& text);
// nccl-tests' type names: float, bfloat16, int32.
const char* comm_dtype_name(DType t);

// Runs the benchmark on `comm` (every rank must call it with the same options) and writes the
// tables to `out` on rank 0. Returns the number of wrong values over all ranks and sizes.
// With a `peer` (e.g. MPI's own collectives), every size is also run out of place on the peer in
// the same run, and two more columns give the peer's busbw and zaya's busbw over the peer's.
// The buffers are in `memory`'s memory (nullptr: the host's), which comm and peer must move;
// `control` (nullptr: comm) is a host communicator for the timings and the checks.
int64_t run_comm_bench(dist::Communicator& comm, const CommBenchOptions& opt, std::FILE* out,
                       dist::Communicator* peer = nullptr, const Backend* memory = nullptr,
                       dist::Communicator* control = nullptr);

}  // namespace zaya
