#include "backend/cpu/rowwise.h"

#include <cstddef>
#include <cstring>

#include "backend/cpu/parallel_threshold.h"

ZAYA_CPU_TARGET_BEGIN
namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

namespace {

// 16 running sums in one vector (one zmm register with AVX-512, two ymm with AVX2, four xmm on
// the baseline). GCC's vector extension makes every dot product of this file use the same vector
// operations, whatever the surrounding code and the vector path (vector_path.h): lane j adds
// a[i]·b[i] for i ≡ j (mod 16) in order of i.
//
// A Lanes value never crosses a function boundary by value (loads write through a reference):
// how a 64-byte vector is passed depends on whether AVX-512 is enabled, and GCC rejects such a
// signature (-Wpsabi) in the compiles without it.
typedef float Lanes __attribute__((vector_size(64)));
constexpr int kLanes = 16;

inline void load(Lanes& v, const float* p) {
  std::memcpy(&v, p, sizeof v);
}

// The last k mod 16 elements, zero-padded: the padding adds 0·0 to the lanes it reaches.
inline void load_tail(Lanes& v, const float* p, int n) {
  v = Lanes{};
  std::memcpy(&v, p, sizeof(float) * size_t(n));
}

// The lanes summed by a fixed pairwise tree, 16 → 8 → 4 → 2 → 1: lane j adds lane j + width. Done
// on halves of the vector; each addition is the same IEEE operation on the same two numbers as
// the scalar tree would be.
typedef float Lanes8 __attribute__((vector_size(32)));
typedef float Lanes4 __attribute__((vector_size(16)));
inline float finish(const Lanes& acc) {
  Lanes8 lo8, hi8;
  std::memcpy(&lo8, &acc, sizeof lo8);
  std::memcpy(&hi8, reinterpret_cast<const char*>(&acc) + sizeof lo8, sizeof hi8);
  const Lanes8 s8 = lo8 + hi8;
  Lanes4 lo4, hi4;
  std::memcpy(&lo4, &s8, sizeof lo4);
  std::memcpy(&hi4, reinterpret_cast<const char*>(&s8) + sizeof lo4, sizeof hi4);
  const Lanes4 s4 = lo4 + hi4;
  const float s2a = s4[0] + s4[2], s2b = s4[1] + s4[3];
  return s2a + s2b;
}

// finish() of four accumulators at once (lane q: finish(acc[q])): the same additions of the same
// two numbers each, side by side, so the same bits.
inline Lanes4 finish4(const Lanes* acc) {
  const Lanes ab = __builtin_shufflevector(acc[0], acc[1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19,
                                           20, 21, 22, 23) +
                   __builtin_shufflevector(acc[0], acc[1], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26,
                                           27, 28, 29, 30, 31);
  const Lanes cd = __builtin_shufflevector(acc[2], acc[3], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19,
                                           20, 21, 22, 23) +
                   __builtin_shufflevector(acc[2], acc[3], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26,
                                           27, 28, 29, 30, 31);
  const Lanes s4 =
      __builtin_shufflevector(ab, cd, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27) +
      __builtin_shufflevector(ab, cd, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
  const Lanes8 s2 = __builtin_shufflevector(s4, s4, 0, 1, 4, 5, 8, 9, 12, 13) +
                    __builtin_shufflevector(s4, s4, 2, 3, 6, 7, 10, 11, 14, 15);
  return __builtin_shufflevector(s2, s2, 0, 2, 4, 6) + __builtin_shufflevector(s2, s2, 1, 3, 5, 7);
}

// R input rows × W weight rows: R·W independent sums (instruction-level parallelism), each one
// the same sequence of vector operations as a lone fixed_order_dot.
template <int R, int W>
inline void dots(float* out, size_t out_stride, const float* x, size_t x_stride, const float* w,
                 size_t w_stride, int k) {
  Lanes acc[R][W] = {};
  const int full = k / kLanes * kLanes;
  for (int i = 0; i < full; i += kLanes) {
    Lanes wv[W];
    for (int q = 0; q < W; ++q) load(wv[q], w + q * w_stride + i);
    for (int r = 0; r < R; ++r) {
      Lanes xv;
      load(xv, x + r * x_stride + i);
      for (int q = 0; q < W; ++q) acc[r][q] += xv * wv[q];
    }
  }
  if (full < k) {
    for (int r = 0; r < R; ++r) {
      Lanes xv, wv;
      load_tail(xv, x + r * x_stride + full, k - full);
      for (int q = 0; q < W; ++q) {
        load_tail(wv, w + q * w_stride + full, k - full);
        acc[r][q] += xv * wv;
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    if constexpr (W == 4) {
      const Lanes4 f = finish4(acc[r]);
      std::memcpy(out + r * out_stride, &f, sizeof f);
    } else {
      for (int q = 0; q < W; ++q) out[r * out_stride + q] = finish(acc[r][q]);
    }
  }
}

}  // namespace

float fixed_order_dot(const float* a, const float* b, int k) {
  float out;
  dots<1, 1>(&out, 0, a, 0, b, 0, k);
  return out;
}

void rows_matmul_forward(float* out, const float* in, const float* w, const float* bias, int n,
                         int k, int m) {
  if (n <= 0 || m <= 0) return;
  // Blocks of 4 weight rows are the unit of work (and of parallelism): a block stays in cache
  // while every input row passes over it, four rows at a time (16 independent sums). No choice here
  // changes the operations of any one output element, so a row's results are the same in every
  // call.
  constexpr int kW = 4;
  const int blocks = (m + kW - 1) / kW;
  const size_t K = size_t(k), M = size_t(m);
  // Below about 256k multiply-adds (tens of microseconds on one core) waking the other threads
  // costs more than it saves: with OMP_WAIT_POLICY=passive each region is a futex round trip per
  // thread, and a small model's decode step is hundreds of such regions.
#pragma omp parallel for schedule(static) if (worth_threads(int64_t(n) * k * m, int64_t(1) << 18))
  for (int blk = 0; blk < blocks; ++blk) {
    const int o0 = blk * kW;
    const float* wb = w + size_t(o0) * K;
    if (m - o0 >= kW) {
      int r = 0;
      for (; r + 4 <= n; r += 4)
        dots<4, kW>(out + size_t(r) * M + o0, M, in + size_t(r) * K, K, wb, K, k);
      if (r + 2 <= n) {
        dots<2, kW>(out + size_t(r) * M + o0, M, in + size_t(r) * K, K, wb, K, k);
        r += 2;
      }
      if (r < n) dots<1, kW>(out + size_t(r) * M + o0, M, in + size_t(r) * K, K, wb, K, k);
    } else {
      for (int r = 0; r < n; ++r)
        for (int o = o0; o < m; ++o)
          dots<1, 1>(out + size_t(r) * M + o, 0, in + size_t(r) * K, 0, w + size_t(o) * K, 0, k);
    }
    if (bias)
      for (int r = 0; r < n; ++r)
        for (int o = o0; o < o0 + kW && o < m; ++o) out[size_t(r) * M + o] += bias[o];
  }
}

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
ZAYA_CPU_TARGET_END
