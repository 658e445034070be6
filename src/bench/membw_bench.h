// `zaya bench membw`: STREAM's four kernels (copy, scale, add, triad) on this machine's memory, per
// thread count, with STREAM's conventions: double arrays each at least 4 times the last-level
// cache, each kernel run `times` times, the first dropped, the best rate reported, and bytes
// counted as STREAM does (copy and scale 16 per element, add and triad 24; no write-allocate).
#pragma once

#include <cstdint>
#include <cstdio>
#include <vector>

namespace zaya {

struct MembwOptions {
  int64_t elements = 0;  // per array; 0: 4 × the last-level cache, within [2^22, 2^27]
  int times = 10;
  std::vector<int> threads;  // empty: 1, 2, 4, ... up to the OpenMP thread count, and it
};

struct MembwRow {
  int threads = 0;
  double copy = 0, scale = 0, add = 0, triad = 0;  // GB/s (1e9 bytes per second)
};

// The table goes to `out` (nullptr: nowhere).
std::vector<MembwRow> run_membw_bench(const MembwOptions& opt, std::FILE* out);

}  // namespace zaya
