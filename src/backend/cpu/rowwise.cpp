#include "backend/cpu/rowwise.h"

#include <cstddef>
#include <cstring>
#include <vector>

#include "backend/cpu/parallel_threshold.h"

ZAYA_CPU_TARGET_BEGIN
namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

namespace {

// 16 running sums, lane j adding a[i]·b[i] for i ≡ j (mod 16) in order of i, on every vector path
// (vector_path.h): one zmm register with AVX-512, two ymm with AVX2, four xmm on the baseline. The
// lanes are held as `kParts` vectors of the path's own width, never as one 64-byte vector where
// the path has no 64-byte registers: GCC keeps such a vector in memory and moves it piecewise
// (an AVX2 decode at a third of the AVX-512 path's speed), and rejects it as a function's value
// (-Wpsabi). Each operation acts on each lane alone, so how the 16 are split never changes a bit.
constexpr int kLanes = 16;
constexpr int kWidth = ZAYA_CPU_VECTOR_FLOATS;
constexpr int kParts = kLanes / kWidth;
typedef float Vec __attribute__((vector_size(kWidth * sizeof(float))));
typedef float UnalignedVec
    __attribute__((vector_size(kWidth * sizeof(float)), aligned(4), may_alias));
typedef float Lanes4 __attribute__((vector_size(16)));
struct Lanes {
  Vec part[kParts];  // lanes [kWidth·p, kWidth·(p + 1))
};

// The first two levels of the fixed pairwise tree 16 → 8 → 4 → 2 → 1 in which lane j adds lane
// j + width: s8[j] = a[j] + a[j + 8], then s4[j] = s8[j] + s8[j + 4]. Each addition is the same
// IEEE operation on the same two numbers on every path.
inline Lanes4 sum_to_4(const Lanes& a) {
#if ZAYA_CPU_VECTOR_FLOATS == 16
  typedef float Vec8 __attribute__((vector_size(32)));
  const Vec8 s8 = __builtin_shufflevector(a.part[0], a.part[0], 0, 1, 2, 3, 4, 5, 6, 7) +
                  __builtin_shufflevector(a.part[0], a.part[0], 8, 9, 10, 11, 12, 13, 14, 15);
  return __builtin_shufflevector(s8, s8, 0, 1, 2, 3) + __builtin_shufflevector(s8, s8, 4, 5, 6, 7);
#elif ZAYA_CPU_VECTOR_FLOATS == 8
  const Vec s8 = a.part[0] + a.part[1];
  return __builtin_shufflevector(s8, s8, 0, 1, 2, 3) + __builtin_shufflevector(s8, s8, 4, 5, 6, 7);
#else
  return (a.part[0] + a.part[2]) + (a.part[1] + a.part[3]);
#endif
}

// The tree's last two levels: (s4[0] + s4[2]) + (s4[1] + s4[3]).
inline float finish(const Lanes& acc) {
  const Lanes4 s4 = sum_to_4(acc);
  const float s2a = s4[0] + s4[2], s2b = s4[1] + s4[3];
  return s2a + s2b;
}

// finish() of four accumulators at once (lane q: finish(acc[q])): the same additions of the same
// two numbers each, side by side (the four s4 transposed), so the same bits.
inline Lanes4 finish4(const Lanes* acc) {
  const Lanes4 a = sum_to_4(acc[0]), b = sum_to_4(acc[1]), c = sum_to_4(acc[2]),
               d = sum_to_4(acc[3]);
  const Lanes4 ab02 = __builtin_shufflevector(a, b, 0, 4, 2, 6);  // a0 b0 a2 b2
  const Lanes4 cd02 = __builtin_shufflevector(c, d, 0, 4, 2, 6);
  const Lanes4 ab13 = __builtin_shufflevector(a, b, 1, 5, 3, 7);
  const Lanes4 cd13 = __builtin_shufflevector(c, d, 1, 5, 3, 7);
  const Lanes4 col0 = __builtin_shufflevector(ab02, cd02, 0, 1, 4, 5);  // a0 b0 c0 d0
  const Lanes4 col2 = __builtin_shufflevector(ab02, cd02, 2, 3, 6, 7);
  const Lanes4 col1 = __builtin_shufflevector(ab13, cd13, 0, 1, 4, 5);
  const Lanes4 col3 = __builtin_shufflevector(ab13, cd13, 2, 3, 6, 7);
  return (col0 + col2) + (col1 + col3);
}

// One 16-element step of part p of R input rows × W weight rows: sum[r][q] += x_r · w_q over the
// step's lanes [kWidth·p, kWidth·(p + 1)), lane by lane.
template <int R, int W>
inline void multiply_add_part(Vec (&sum)[R][W], const float* x, size_t x_stride, const float* w,
                              size_t w_stride) {
  Vec wv[W];
  for (int q = 0; q < W; ++q) wv[q] = *reinterpret_cast<const UnalignedVec*>(w + q * w_stride);
  for (int r = 0; r < R; ++r) {
    const Vec xv = *reinterpret_cast<const UnalignedVec*>(x + r * x_stride);
    for (int q = 0; q < W; ++q) sum[r][q] += xv * wv[q];
  }
}

// R input rows × W weight rows: R·W independent sums (instruction-level parallelism), each one
// the same sequence of operations on each lane as a lone fixed_order_dot. A lane's sum never
// meets another lane's before finish(), so the parts of the 16 lanes are summed one after the
// other, each over all of k: R·W registers at a time instead of R·W·kParts. With AVX2 that is
// what lets 3 rows share each load of 4 weight vectors (12 sums and the weights in 16 ymm):
// loads, two a cycle here, bound the one-row kernel (10 loads per 8 multiplications), and the
// 3 × 4 tile takes 1.4x its multiply-adds a second on one core of the developer's Zen 5.
template <int R, int W>
inline void dots(float* out, size_t out_stride, const float* x, size_t x_stride, const float* w,
                 size_t w_stride, int k, const float* prefetch = nullptr) {
  const int full = k / kLanes * kLanes;
  // The last k mod 16 elements, zero-padded (the padding adds 0·0 to the lanes it reaches) and
  // taken by the same step as the others. Copied element by element: a call to memcpy here made
  // GCC keep every accumulator in memory (a third of the AVX2 path's product time).
  float x_tail[R][kLanes], w_tail[W][kLanes];
  if (full < k)
    for (int j = 0; j < kLanes; ++j) {
      const bool inside = full + j < k;
      for (int r = 0; r < R; ++r) x_tail[r][j] = inside ? x[r * x_stride + full + j] : 0.0f;
      for (int q = 0; q < W; ++q) w_tail[q][j] = inside ? w[q * w_stride + full + j] : 0.0f;
    }
  Lanes acc[R][W];
  for (int p = 0; p < kParts; ++p) {
    const int lane0 = p * kWidth;
    Vec sum[R][W];
    for (int r = 0; r < R; ++r)
      for (int q = 0; q < W; ++q) sum[r][q] = Vec{};
    for (int i = 0; i < full; i += kLanes) {
      if (prefetch && p == 0)
        for (int q = 0; q < W; ++q) __builtin_prefetch(prefetch + q * w_stride + i);
      multiply_add_part<R, W>(sum, x + i + lane0, x_stride, w + i + lane0, w_stride);
    }
    if (full < k)
      multiply_add_part<R, W>(sum, &x_tail[0][lane0], kLanes, &w_tail[0][lane0], kLanes);
    for (int r = 0; r < R; ++r)
      for (int q = 0; q < W; ++q) acc[r][q].part[p] = sum[r][q];
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

namespace {

// Blocks of 4 weight rows are the unit of work (and of parallelism): a block stays in cache
// while every input row passes over it, a tile of rows at a time. No choice here
// changes the operations of any one output element, so a row's results are the same in every
// call.
constexpr int kW = 4;
// Input rows a block takes at a time: their sums stay in registers beside the block's weights.
// 32 zmm hold 4 rows × 4 weight rows of 16-lane sums; 16 ymm (or xmm), one part of the lanes at a
// time (dots), hold 3 × 4 and the 4 weight vectors.
constexpr int kVectorFloatsInRegisters = ZAYA_CPU_VECTOR_REGISTERS * ZAYA_CPU_VECTOR_FLOATS;
constexpr int kRowsPerTile = kVectorFloatsInRegisters >= 512 ? 4 : 3;
constexpr int kBlocksAhead = 4;

int weight_blocks(int m) {
  return (m + kW - 1) / kW;
}

// Block `blk` of the product: out[:, 4·blk, 4·blk + 4) for every one of the n rows.
void rows_block(float* out, const float* in, const float* w, const float* bias, int n, int k, int m,
                int blk) {
  const int blocks = weight_blocks(m);
  const size_t K = size_t(k), M = size_t(m);
  const int o0 = blk * kW;
  const float* wb = w + size_t(o0) * K;
  if (m - o0 >= kW) {
    int r = 0;
    // The first pass over a block asks for a later block's weights, which are on their way
    // from memory by the time it is reached (the hardware's prefetchers lose the four rows'
    // streams, which are only 1 KB each at k = 256).
    const int ahead = n >= 4 ? 1 : kBlocksAhead;
    const float* prefetch = blk + ahead < blocks ? w + size_t(o0 + ahead * kW) * K : nullptr;
    for (; r + kRowsPerTile <= n; r += kRowsPerTile) {
      dots<kRowsPerTile, kW>(out + size_t(r) * M + o0, M, in + size_t(r) * K, K, wb, K, k,
                             prefetch);
      prefetch = nullptr;
    }
    if (r + 2 <= n) {
      dots<2, kW>(out + size_t(r) * M + o0, M, in + size_t(r) * K, K, wb, K, k, prefetch);
      r += 2;
      prefetch = nullptr;
    }
    for (; r < n; ++r) {
      dots<1, kW>(out + size_t(r) * M + o0, M, in + size_t(r) * K, K, wb, K, k, prefetch);
      prefetch = nullptr;
    }
  } else {
    for (int r = 0; r < n; ++r)
      for (int o = o0; o < m; ++o)
        dots<1, 1>(out + size_t(r) * M + o, 0, in + size_t(r) * K, 0, w + size_t(o) * K, 0, k);
  }
  if (bias)
    for (int r = 0; r < n; ++r)
      for (int o = o0; o < o0 + kW && o < m; ++o) out[size_t(r) * M + o] += bias[o];
}

}  // namespace

void rows_matmul_forward(float* out, const float* in, const float* w, const float* bias, int n,
                         int k, int m) {
  if (n <= 0 || m <= 0) return;
  const int blocks = weight_blocks(m);
  // Below about 256k multiply-adds (tens of microseconds on one core) waking the other threads
  // costs more than it saves: with OMP_WAIT_POLICY=passive each region is a futex round trip per
  // thread, and a small model's decode step is hundreds of such regions.
  for_ranges(blocks, worth_threads(int64_t(n) * k * m, int64_t(1) << 18),
             [&](int64_t first, int64_t last) {
               for (int blk = int(first); blk < int(last); ++blk)
                 rows_block(out, in, w, bias, n, k, m, blk);
             });
}

void grouped_rows_matmul_forward(float* out, const float* in, const float* const* weights,
                                 const int* offsets, int groups, int k, int m) {
  if (m <= 0) return;
  std::vector<int> busy;  // the groups with rows, in order
  for (int g = 0; g < groups; ++g)
    if (offsets[g + 1] > offsets[g]) busy.push_back(g);
  const int blocks = weight_blocks(m);
  const int units = int(busy.size()) * blocks;  // (group, block) pairs
  const int64_t rows = int64_t(offsets[groups]) - offsets[0];
  const size_t K = size_t(k), M = size_t(m);
  for_ranges(units, worth_threads(rows * k * m, int64_t(1) << 18),
             [&](int64_t first, int64_t last) {
               for (int u = int(first); u < int(last); ++u) {
                 const int g = busy[size_t(u / blocks)], row0 = offsets[g];
                 rows_block(out + size_t(row0) * M, in + size_t(row0) * K, weights[g], nullptr,
                            offsets[g + 1] - row0, k, m, u % blocks);
               }
             });
}

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
ZAYA_CPU_TARGET_END
