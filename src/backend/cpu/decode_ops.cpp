#include "backend/cpu/decode_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include <omp.h>

#include "backend/cpu/fast_exp.h"
#include "backend/cpu/parallel_threshold.h"

ZAYA_CPU_TARGET_BEGIN
namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

namespace {

// Vectors of the path's own width (cpu_path_target.h), as in rowwise.cpp: a wider GCC vector would
// live in memory on a narrower path.
constexpr int kWidth = ZAYA_CPU_VECTOR_FLOATS;
typedef float Vec __attribute__((vector_size(kWidth * sizeof(float))));
typedef float UnalignedVec
    __attribute__((vector_size(kWidth * sizeof(float)), aligned(4), may_alias));

inline Vec splat(float f) {
  Vec v;
  for (int i = 0; i < kWidth; ++i) v[i] = f;
  return v;
}

// fast_exp (fast_exp.h) of each lane: the same operations on each lane, so the same bits. Its
// rint is 1.5·2^23 added and taken away, which rounds half to even as rint does in the default
// rounding mode for the |x·log2 e| < 2^22 that the clamp leaves (the baseline has no vector
// rounding instruction).
inline Vec fast_exp_lanes(Vec x_in) {
  typedef int32_t Ints __attribute__((vector_size(kWidth * sizeof(int32_t))));
  const Vec x = x_in < splat(-87.0f) ? splat(-87.0f) : (x_in > splat(88.0f) ? splat(88.0f) : x_in);
  const Vec magic = splat(12582912.0f);  // 1.5 · 2^23
  const Vec n = (x * kExpLog2e + magic) - magic;
  const Vec r = (x - n * kExpLn2High) - n * kExpLn2Low;
  Vec p = splat(kExpFirst);
  for (const float c : kExpSteps) p = p * r + c;
  const Ints bits = (__builtin_convertvector(n, Ints) + 127) << 23;
  const Vec scale = (Vec)bits;  // the same bytes
  return x_in < splat(-87.0f) ? splat(0.0f) : p * scale;
}

// The slice of a head's values whose weighted sums are held in registers across positions.
constexpr int kSlice = 32;
constexpr int kSliceParts = kSlice / kWidth;
// The attention's scores: kSide positions side by side in the lanes of one vector, each lane the
// same chain of additions over x as a lone score (8 lanes on the AVX2 and AVX-512 paths, 4 on the
// baseline's 16-byte registers).
constexpr int kSide = kWidth >= 8 ? 8 : 4;
typedef float SideVec __attribute__((vector_size(kSide * sizeof(float))));
typedef float UnalignedSideVec
    __attribute__((vector_size(kSide * sizeof(float)), aligned(4), may_alias));

// m[i][x] becomes m[x][i]: the rows of kSide keys read as vectors, turned into columns (one x
// of every key), by shuffles within registers.
inline void transpose(SideVec (&m)[kSide]) {
#if ZAYA_CPU_VECTOR_FLOATS >= 8
  SideVec t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = __builtin_shufflevector(m[i], m[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[i + 1] = __builtin_shufflevector(m[i], m[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int i = 0; i < 8; i += 4)
    for (int h = 0; h < 2; ++h) {
      u[i + 2 * h] = __builtin_shufflevector(t[i + h], t[i + 2 + h], 0, 1, 8, 9, 4, 5, 12, 13);
      u[i + 2 * h + 1] =
          __builtin_shufflevector(t[i + h], t[i + 2 + h], 2, 3, 10, 11, 6, 7, 14, 15);
    }
  for (int x = 0; x < 4; ++x) {
    m[x] = __builtin_shufflevector(u[x], u[x + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    m[x + 4] = __builtin_shufflevector(u[x], u[x + 4], 4, 5, 6, 7, 12, 13, 14, 15);
  }
#else
  const SideVec t0 = __builtin_shufflevector(m[0], m[1], 0, 4, 1, 5);
  const SideVec t1 = __builtin_shufflevector(m[0], m[1], 2, 6, 3, 7);
  const SideVec t2 = __builtin_shufflevector(m[2], m[3], 0, 4, 1, 5);
  const SideVec t3 = __builtin_shufflevector(m[2], m[3], 2, 6, 3, 7);
  m[0] = __builtin_shufflevector(t0, t2, 0, 1, 4, 5);
  m[1] = __builtin_shufflevector(t0, t2, 2, 3, 6, 7);
  m[2] = __builtin_shufflevector(t1, t3, 0, 1, 4, 5);
  m[3] = __builtin_shufflevector(t1, t3, 2, 3, 6, 7);
#endif
}

// The scores q_h · k_i of kSide keys (rows `key_stride` apart) for HT query heads at once, each
// summed over x in order: the heads share each tile's loads and transposes.
template <int HT>
inline void side_scores(SideVec (&dot)[HT], const float* const (&q)[HT], const float* k,
                        size_t key_stride, int d) {
  for (int h = 0; h < HT; ++h) dot[h] = SideVec{};
  int x = 0;
  for (; x + kSide <= d; x += kSide) {
    SideVec col[kSide];
    for (int i = 0; i < kSide; ++i)
      col[i] = *reinterpret_cast<const UnalignedSideVec*>(k + size_t(i) * key_stride + x);
    transpose(col);
    for (int t = 0; t < kSide; ++t)
      for (int h = 0; h < HT; ++h) dot[h] += q[h][x + t] * col[t];
  }
  for (; x < d; ++x) {
    SideVec col;
    for (int i = 0; i < kSide; ++i) col[i] = k[size_t(i) * key_stride + x];
    for (int h = 0; h < HT; ++h) dot[h] += q[h][x] * col;
  }
}

// Blocks ahead whose keys and values an item asks for while it scores a block. A row's blocks are
// scattered in the pool, so the hardware's prefetchers cannot find the next one; asked for whole
// (every key head's keys, then the values), line after line, the hardware streams them. (Asked
// for as one key head's rows, half of each position's lines, the attention read its cache at a
// quarter of the bandwidth: most of a batch-16 decode step's attention time.)
constexpr int kKvBlocksAhead = 1;

// Query heads an attention item takes together (of one key head): they share the loads and
// transposes of its keys and the loads of its values. Two heads' value sums of a slice are 8 ymm
// registers on AVX2.
constexpr int kHeadsTogether = 2;

struct AttentionShape {
  int nq, nk, d;
  float scale;
  size_t score_stride;  // floats of `scores` per (row, query head)
};

// A row's blocks of cached positions, in position order.
struct RowCache {
  const PagedKv& kv;
  const int32_t* blocks;
  const int32_t* counts;
  int held_blocks = 0;
  size_t held = 0;  // positions
  RowCache(const PagedKv& kv_in, int r)
      : kv(kv_in),
        blocks(kv_in.blocks + size_t(r) * kv_in.max_blocks),
        counts(kv_in.counts + size_t(r) * kv_in.max_blocks) {
    while (held_blocks < kv.max_blocks && counts[held_blocks] > 0)
      held += size_t(counts[held_blocks++]);
  }
  const float* keys(int i) const { return kv.keys + size_t(blocks[i]) * size_t(kv.block_stride); }
  const float* values(int i) const { return keys(i) + kv.values_offset; }
};

// The next row's cache asked for into the second-level cache a few lines at a time while the
// thread computes this row, spread over its `ticks` calls of ask(): asked for all at once, the
// requests fill the core's queue of misses and the row waits for them, so a row's reads and its
// arithmetic took the sum of their times instead of the longer one.
class RowAhead {
 public:
  RowAhead(const PagedKv& kv, int r, int Dk, int64_t ticks) : row_(kv, r), Dk_(Dk) {
    int64_t lines = 0;
    for (int i = 0; i < row_.held_blocks; ++i) lines += (block_bytes(i) + 63) / 64;
    per_tick_ = (lines + ticks - 1) / std::max<int64_t>(ticks, 1);
    if (row_.held_blocks > 0) start_block(0);
  }
  void ask() {
    int64_t left = per_tick_;
    while (left > 0 && at_ < end_) {
      const int64_t n = std::min(left, (end_ - at_ + 63) / 64);
      for (int64_t i = 0; i < n; ++i) __builtin_prefetch(at_ + 64 * i, 0, 1);
      left -= n;
      at_ = end_ - at_ <= 64 * n ? end_ : at_ + 64 * n;
      if (at_ == end_ && block_ + 1 < row_.held_blocks) start_block(block_ + 1);
    }
  }

 private:
  // A block's keys and values, one run of memory.
  int64_t block_bytes(int i) const {
    return int64_t(row_.counts[i]) * Dk_ * 4 + row_.kv.values_offset * 4;
  }
  void start_block(int i) {
    block_ = i;
    at_ = reinterpret_cast<const char*>(row_.keys(i));
    end_ = at_ + block_bytes(i);
  }
  const RowCache row_;
  const int Dk_;
  int64_t per_tick_ = 0;
  int block_ = 0;
  const char* at_ = nullptr;  // the next line to ask for, in block_
  const char* end_ = nullptr;
};

// Query heads h0 .. h0 + HT of row r, of one key head.
template <int HT>
struct HeadGroup {
  const float* q[HT];
  float* score[HT];
  size_t item[HT];
  int j;  // the key head
  HeadGroup(const float* q_all, float* scores, const AttentionShape& a, int r, int h0)
      : j(h0 / (a.nq / a.nk)) {
    for (int h = 0; h < HT; ++h) {
      item[h] = size_t(r) * a.nq + size_t(h0 + h);
      q[h] = q_all + item[h] * a.d;
      score[h] = scores + item[h] * a.score_stride;
    }
  }
};

// The group's scores of `count` positions whose keys start at `keys` (all key heads'), stored
// from position `first` of the row on.
template <int HT>
void score_positions(const HeadGroup<HT>& g, const AttentionShape& a, const float* keys, int count,
                     size_t first) {
  const int d = a.d, Dk = a.nk * a.d;
  const float* k0 = keys + size_t(g.j) * d;
  int p = 0;
  for (; p + kSide <= count; p += kSide) {
    SideVec dot[HT];
    side_scores<HT>(dot, g.q, k0 + size_t(p) * Dk, size_t(Dk), d);
    for (int h = 0; h < HT; ++h)
      for (int l = 0; l < kSide; ++l) g.score[h][first + size_t(p + l)] = dot[h][l] * a.scale;
  }
  for (; p < count; ++p)
    for (int h = 0; h < HT; ++h) {
      const float* k = k0 + size_t(p) * Dk;
      float dot = 0.0f;
      for (int x = 0; x < d; ++x) dot += g.q[h][x] * k[x];
      g.score[h][first + size_t(p)] = dot * a.scale;
    }
}

// Max, exponentials (in place of the scores) and their sum, each head's in position order.
template <int HT>
void softmax_terms(const HeadGroup<HT>& g, size_t held, float* max, float* sum) {
  float mx[HT], total[HT];
  for (int h = 0; h < HT; ++h) mx[h] = -INFINITY;
  for (size_t p = 0; p < held; ++p)
    for (int h = 0; h < HT; ++h) mx[h] = std::max(mx[h], g.score[h][p]);
  for (int h = 0; h < HT; ++h) {
    float* sc = g.score[h];
    size_t p = 0;
    for (; p + kWidth <= held; p += kWidth) {
      const Vec e = fast_exp_lanes(*reinterpret_cast<const UnalignedVec*>(sc + p) - mx[h]);
      std::memcpy(sc + p, &e, sizeof e);
    }
    for (; p < held; ++p) sc[p] = fast_exp(sc[p] - mx[h]);
    total[h] = 0.0f;
  }
  for (size_t p = 0; p < held; ++p)
    for (int h = 0; h < HT; ++h) total[h] += g.score[h][p];
  for (int h = 0; h < HT; ++h) {
    max[g.item[h]] = mx[h];
    sum[g.item[h]] = total[h];
  }
}

// out_h[x] = Σ score_h · v[x] over the positions in order. The sums of a slice of x are held in
// local arrays across all positions, which the compiler keeps in registers (summed into out in
// place, each position's additions waited on the previous one's store).
template <int HT>
void weighted_values(const HeadGroup<HT>& g, const AttentionShape& a, const RowCache& row,
                     RowAhead* ahead, float* out) {
  const int d = a.d, Dk = a.nk * a.d;
  for (int x0 = 0; x0 < d; x0 += kSlice) {
    const int width = std::min(kSlice, d - x0);
    Vec acc[HT][kSliceParts] = {};
    float tail[HT][kSlice] = {};
    size_t p = 0;
    for (int i = 0; i < row.held_blocks; ++i) {
      if (ahead) ahead->ask();
      // The next block's values asked for while this one's are summed: the scores' pass asked
      // for them too, but a row's cache outgrows the first-level cache between the two passes
      // (BM_KvAttention from memory 1.15x faster with this, stop 54).
      if (i + 1 < row.held_blocks) {
        const char* from = reinterpret_cast<const char*>(row.values(i + 1));
        const char* to =
            reinterpret_cast<const char*>(row.values(i + 1) + size_t(row.counts[i + 1]) * Dk);
        for (; from < to; from += 64) __builtin_prefetch(from);
      }
      const float* v = row.values(i) + size_t(g.j) * d + x0;
      for (int c = 0; c < row.counts[i]; ++c, ++p, v += Dk) {
        if (width == kSlice) {
          for (int q = 0; q < kSliceParts; ++q) {
            const Vec vq = *reinterpret_cast<const UnalignedVec*>(v + q * kWidth);
            for (int h = 0; h < HT; ++h) acc[h][q] += vq * g.score[h][p];
          }
        } else {
          for (int h = 0; h < HT; ++h)
            for (int x = 0; x < width; ++x) tail[h][x] += g.score[h][p] * v[x];
        }
      }
    }
    for (int h = 0; h < HT; ++h) {
      float* o = out + g.item[h] * d + x0;
      if (width == kSlice) {
        std::memcpy(o, acc[h], sizeof acc[h]);
      } else {
        std::copy(tail[h], tail[h] + width, o);
      }
    }
  }
}

// The partials of query heads h0 .. h0 + HT of row r, of one key head: its keys' scores block by
// block, then the softmax terms and the weighted values.
template <int HT>
void attend_group(float* max, float* sum, float* out, float* scores, const float* q,
                  const PagedKv& kv, const AttentionShape& a, int r, int h0, RowAhead* ahead) {
  const RowCache row(kv, r);
  const HeadGroup<HT> g(q, scores, a, r, h0);
  const int Dk = a.nk * a.d;
  if (row.held == 0) {
    for (int h = 0; h < HT; ++h) {
      std::fill(out + g.item[h] * a.d, out + g.item[h] * a.d + a.d, 0.0f);
      max[g.item[h]] = -INFINITY;
      sum[g.item[h]] = 0.0f;
    }
    return;
  }
  const auto ask_for = [&](int i) {
    if (i >= row.held_blocks) return;
    const char* from = reinterpret_cast<const char*>(row.keys(i));
    const char* to = reinterpret_cast<const char*>(row.values(i) + size_t(row.counts[i]) * Dk);
    for (; from < to; from += 64) __builtin_prefetch(from);
  };
  for (int i = 0; i < kKvBlocksAhead; ++i) ask_for(i);
  size_t first = 0;
  for (int i = 0; i < row.held_blocks; ++i) {
    ask_for(i + kKvBlocksAhead);
    if (ahead) ahead->ask();
    score_positions(g, a, row.keys(i), row.counts[i], first);
    first += size_t(row.counts[i]);
  }
  softmax_terms(g, row.held, max, sum);
  weighted_values(g, a, row, ahead, out);
}

}  // namespace

void kv_attention_partials(float* max, float* sum, float* out, float* scores, const float* q,
                           const PagedKv& kv, int n, int nq, int nk, int d) {
  const int g = nq / nk;
  AttentionShape a;
  a.nq = nq;
  a.nk = nk;
  a.d = d;
  a.scale = float(1.0 / std::sqrt(double(d)));
  a.score_stride = size_t(kv.max_blocks) * kv.block_size;
  std::vector<int64_t> row_held(static_cast<size_t>(n), 0);  // each row's cached positions
  int64_t held = 0;
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < kv.max_blocks && kv.counts[size_t(r) * kv.max_blocks + i] > 0; ++i)
      row_held[size_t(r)] += kv.counts[size_t(r) * kv.max_blocks + i];
    held += row_held[size_t(r)];
  }
  // Work items: `together` query heads of one key head of one row (the last of a key head's alone
  // where g is odd). Each is computed by the same code whatever the batch, and a head's arithmetic
  // does not depend on the heads beside it, so neither choice below changes a bit.
  // - Pairs of heads share their key head's loads; single heads make more items where a few rows
  //   would leave threads idle.
  // - With rows enough for every thread, a row's items are one unit of work: one thread reads a
  //   row's blocks once (the other key heads' lines come with each block).
  // - Each thread takes one contiguous range of units of about equal positions, computed alike by
  //   every thread: no shared counter of a dynamic schedule, whose every take is a cache line's
  //   trip between cores (units of one row each cost 4 µs of the 43 a batch-16 call of the small
  //   model took on two cores, stop 54).
  // Small steps (short contexts of a small model) on one thread (see rows_matmul_forward).
  const int threads = omp_get_max_threads();
  const int together = int64_t(n) * nk * 2 >= 2 * int64_t(threads) ? kHeadsTogether : 1;
  const int per_key_head = (g + together - 1) / together, per_row = nk * per_key_head;
  const int unit_items = n >= 2 * threads ? per_row : 1;
  const auto attend_item = [&](int item, RowAhead* ahead) {
    const int r = item / per_row, j = item % per_row / per_key_head;
    const int h0 = j * g + item % per_key_head * together;
    if (together == kHeadsTogether && h0 + kHeadsTogether <= (j + 1) * g) {
      attend_group<kHeadsTogether>(max, sum, out, scores, q, kv, a, r, h0, ahead);
    } else {
      attend_group<1>(max, sum, out, scores, q, kv, a, r, h0, ahead);
    }
  };
  // Items [first, end) in order, each row's cache asked for while the row before it is computed
  // (RowAhead: at each of its blocks of keys, and of values for each slice of d, of every item).
  const int slices = (d + kSlice - 1) / kSlice;
  const auto attend_items = [&](int first, int end) {
    std::optional<RowAhead> ahead;
    for (int item = first; item < end; ++item) {
      const int r = item / per_row;
      if (item % per_row == 0 || item == first) {
        ahead.reset();
        if ((r + 1) * per_row < end) {
          const int64_t blocks = (row_held[size_t(r)] + kv.block_size - 1) / kv.block_size;
          ahead.emplace(kv, r + 1, nk * d, (per_row - item % per_row) * blocks * (1 + slices));
        }
      }
      attend_item(item, ahead ? &*ahead : nullptr);
    }
  };
  const int items = n * per_row;
  if (threads == 1 || !worth_threads(held * nq * d, int64_t(1) << 16)) {
    attend_items(0, items);  // no region (for_ranges)
    return;
  }
  const int units = items / unit_items;
  std::vector<int64_t> before(size_t(units) + 1, 0);  // positions of the units before each
  for (int u = 0; u < units; ++u)
    before[size_t(u) + 1] = before[size_t(u)] + row_held[size_t(u * unit_items / per_row)];
#pragma omp parallel
  {
    // The units u with before[u] in [total·t / T, total·(t + 1) / T), the last thread's to the end.
    const int64_t t = omp_get_thread_num(), T = omp_get_num_threads(), total = before.back();
    const auto first_at = [&](int64_t positions) {
      return int(std::lower_bound(before.begin(), before.end() - 1, positions) - before.begin());
    };
    const int first = first_at(total * t / T);
    const int last = t + 1 == T ? units : first_at(total * (t + 1) / T);
    attend_items(first * unit_items, last * unit_items);
  }
}

void kv_attention_normalize(float* att, const float* sum, const float* out, int items, int d) {
  for (size_t it = 0; it < size_t(items); ++it) {
    const float inv = 1.0f / sum[it];
    for (int x = 0; x < d; ++x) att[it * d + x] = out[it * d + x] * inv;
  }
}

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
ZAYA_CPU_TARGET_END
