#include "bench/membw_bench.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "core/error.h"
#include "core/host_memory.h"

namespace zaya {

namespace {

int64_t default_elements() {
  long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (llc <= 0) llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
  // At most 2^27 doubles (1 GiB) per array and an eighth of the memory for all three: some
  // virtual machines report the host's whole last-level cache.
  const int64_t memory = host_memory_bytes();
  const int64_t most = std::min<int64_t>(int64_t(1) << 27, memory / 8 / 3 / 8);
  return std::clamp<int64_t>(4 * int64_t(std::max(llc, 0L)) / 8, int64_t(1) << 22,
                             std::max<int64_t>(most, int64_t(1) << 22));
}

std::vector<int> default_threads() {
  const int most = omp_get_max_threads();
  std::vector<int> t;
  for (int n = 1; n < most; n *= 2) t.push_back(n);
  t.push_back(most);
  return t;
}

}  // namespace

std::vector<MembwRow> run_membw_bench(const MembwOptions& opt, std::FILE* out) {
  const int64_t n = opt.elements > 0 ? opt.elements : default_elements();
  ZAYA_CHECK(opt.times >= 2, "--times: STREAM drops the first run, so at least 2 (got ", opt.times,
             ")");
  const std::vector<int> threads = opt.threads.empty() ? default_threads() : opt.threads;
  for (const int t : threads)  // before the arrays are allocated
    ZAYA_CHECK(t >= 1 && t <= 4096, "--threads-list: ", t, " is not a thread count in [1, 4096]");
  // Arrays are touched first by the threads that use them (page placement on NUMA machines).
  auto a = std::make_unique_for_overwrite<double[]>(size_t(n));
  auto b = std::make_unique_for_overwrite<double[]>(size_t(n));
  auto c = std::make_unique_for_overwrite<double[]>(size_t(n));
  const int saved = omp_get_max_threads();
  if (out) {
    std::fprintf(out, "STREAM kernels, %lld doubles per array (%.1f MiB each), best of %d runs\n",
                 (long long)n, double(n) * 8 / 1048576, opt.times - 1);
    const long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (llc > 0 && n * 8 < 4 * int64_t(llc))
      std::fprintf(out,
                   "note: the arrays are smaller than 4 x the last-level cache (%.1f MiB): these "
                   "rates are partly the cache's, not memory's (STREAM's rule)\n",
                   double(llc) / 1048576);
    std::fprintf(out, "%8s %10s %10s %10s %10s   (GB/s)\n", "threads", "copy", "scale", "add",
                 "triad");
  }
  std::vector<MembwRow> rows;
  for (const int t : threads) {
    omp_set_num_threads(t);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      a[size_t(i)] = 1.0;
      b[size_t(i)] = 2.0;
      c[size_t(i)] = 0.0;
    }
    const double q = 3.0;
    double best[4] = {1e300, 1e300, 1e300, 1e300};
    double* A = a.get();
    double* B = b.get();
    double* C = c.get();
    for (int run = 0; run < opt.times; ++run) {
      double s[4];
      auto t0 = std::chrono::steady_clock::now();
      auto lap = [&t0] {
        const auto t1 = std::chrono::steady_clock::now();
        const double dt = std::chrono::duration<double>(t1 - t0).count();
        t0 = t1;
        return dt;
      };
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) C[i] = A[i];
      s[0] = lap();
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) B[i] = q * C[i];
      s[1] = lap();
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) C[i] = A[i] + B[i];
      s[2] = lap();
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) A[i] = B[i] + q * C[i];
      s[3] = lap();
      if (run > 0)
        for (int k = 0; k < 4; ++k) best[k] = std::min(best[k], s[k]);
    }
    // As STREAM does: the arrays must hold what the kernels compute from the initial values.
    double aj = 1.0, bj = 2.0, cj = 0.0;
    for (int run = 0; run < opt.times; ++run) {
      cj = aj;
      bj = q * cj;
      cj = aj + bj;
      aj = bj + q * cj;
    }
    for (int64_t i = 0; i < n; i += std::max<int64_t>(1, n / 4099))
      ZAYA_CHECK(std::fabs(A[i] - aj) <= 1e-13 * std::fabs(aj) &&
                     std::fabs(B[i] - bj) <= 1e-13 * std::fabs(bj) &&
                     std::fabs(C[i] - cj) <= 1e-13 * std::fabs(cj),
                 "bench membw: element ", i, " holds wrong values after the kernels at ", t,
                 " threads");
    const double bytes[4] = {16.0 * n, 16.0 * n, 24.0 * n, 24.0 * n};
    MembwRow r{t, bytes[0] / best[0] * 1e-9, bytes[1] / best[1] * 1e-9, bytes[2] / best[2] * 1e-9,
               bytes[3] / best[3] * 1e-9};
    if (out)
      std::fprintf(out, "%8d %10.2f %10.2f %10.2f %10.2f\n", t, r.copy, r.scale, r.add, r.triad);
    rows.push_back(r);
  }
  omp_set_num_threads(saved);
  return rows;
}

}  // namespace zaya
