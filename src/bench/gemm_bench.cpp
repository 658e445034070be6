#include "bench/gemm_bench.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace zaya {

GemmTiming time_gemm(const GemmShape& s, double min_time_s) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  // op(A) is m × k and op(B) k × n whichever way they are stored.
  std::vector<float> a(size_t(s.m) * s.k), b(size_t(s.k) * s.n), c(size_t(s.m) * s.n, 0.0f);
  for (float& x : a) x = u(rng);
  for (float& x : b) x = u(rng);
  const int lda = s.trans_a ? s.m : s.k, ldb = s.trans_b ? s.k : s.n;
  // The CPU backend's general product (OpenBLAS's sgemm): host memory, the vectors above.
  const Backend& be = cpu_backend();
  auto call = [&] {
    be.dense_gemm(s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f,
                  c.data(), s.n);
  };
  using clock = std::chrono::steady_clock;
  auto seconds = [](clock::time_point t0) {
    return std::chrono::duration<double>(clock::now() - t0).count();
  };
  auto t0 = clock::now();
  call();  // warm-up: page faults, OpenBLAS buffers
  const double once = std::max(seconds(t0), 1e-7);
  const int64_t reps = std::max<int64_t>(1, int64_t(min_time_s / 3 / once));
  double best = 1e300;
  for (int batch = 0; batch < 3; ++batch) {
    t0 = clock::now();
    for (int64_t r = 0; r < reps; ++r) call();
    best = std::min(best, seconds(t0) / double(reps));
  }
  return {s, best};
}

std::vector<GemmShape> gemm_sweep() {
  std::vector<GemmShape> out;
  for (int n : {32, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 4096})
    out.push_back({"square", n, n, n});
  for (int n : {127, 129, 255, 257, 1000, 1023, 1025, 2047, 2049})
    out.push_back({"unaligned", n, n, n});
  for (int n : {16, 64, 256}) out.push_back({"skinny", 4096, n, 2048});
  return out;
}

std::vector<GemmShape> gemm_grid() {
  std::vector<GemmShape> out;
  for (int m : {16, 64, 256, 1024, 4096})
    for (int n : {16, 64, 256, 1024, 4096})
      for (int k : {16, 64, 256, 1024, 4096}) out.push_back({"grid", m, n, k});
  return out;
}

std::vector<GemmShape> parse_gemm_list(const std::string& text) {
  std::vector<GemmShape> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t end = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, end - pos);
    long long m = 0, n = 0, k = 0;
    char tail = 0;
    const int got = std::sscanf(item.c_str(), "%lldx%lldx%lld%c", &m, &n, &k, &tail);
    ZAYA_CHECK(got == 3 && m > 0 && n > 0 && k > 0 && m <= 65536 && n <= 65536 && k <= 65536,
               "--shapes: '", item,
               "' is not MxNxK with each size in [1, 65536] (e.g. 4096x2048x2048)");
    out.push_back({"shape", int(m), int(n), int(k)});
    pos = end + 1;
  }
  return out;
}

std::vector<GemmTiming> run_gemm_bench(const std::vector<GemmShape>& shapes, double min_time_s,
                                       bool model_total, bool progress, std::FILE* out,
                                       const GemmTimer& timer) {
  std::vector<GemmTiming> t;
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (progress)
      std::fprintf(stderr, "\r\033[Kgemm %zu/%zu: %dx%dx%d", i + 1, shapes.size(), shapes[i].m,
                   shapes[i].n, shapes[i].k);
    t.push_back(timer ? timer(shapes[i], min_time_s) : time_gemm(shapes[i], min_time_s));
  }
  if (progress) std::fprintf(stderr, "\r\033[K");
  double total = 0;
  for (const GemmTiming& g : t) total += g.seconds * double(g.shape.count);
  std::fprintf(out, "%-22s %6s %6s %6s %3s %8s %11s %9s%s\n", "product", "M", "N", "K", "op",
               "calls", "ms/call", "GFLOP/s", model_total ? "   share" : "");
  for (const GemmTiming& g : t) {
    const GemmShape& s = g.shape;
    const char* op = s.trans_a ? (s.trans_b ? "TT" : "TN") : (s.trans_b ? "NT" : "NN");
    std::fprintf(out, "%-22s %6d %6d %6d %3s %8lld %11.4f %9.1f", s.name.c_str(), s.m, s.n, s.k, op,
                 (long long)s.count, g.seconds * 1e3, g.gflops());
    if (model_total) std::fprintf(out, " %6.1f %%", 100 * g.seconds * double(s.count) / total);
    std::fprintf(out, "\n");
  }
  if (model_total) {
    double flops = 0;
    for (const GemmTiming& g : t) flops += g.shape.flops() * double(g.shape.count);
    std::fprintf(out, "total: %.1f ms, %.2f GFLOP at %.1f GFLOP/s\n", total * 1e3, flops * 1e-9,
                 flops / total * 1e-9);
  }
  return t;
}

}  // namespace zaya
