#include "backend/cpu/matmul.h"
#include <cstddef>

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "backend/cpu/reduce.h"
#include "backend/cpu/single_threaded_blas.h"

namespace zaya::cpu {

namespace {

// How gemm cuts C into tiles: a function of the product's shape and of the machine's core count,
// never of the thread count, so that a run's numbers do not change when its thread count does (the
// trainer adapts the count to the CPU it is given; --threads may be anything). Tiles are halved
// along their longer side until there are two per core, while that side is at least kMinSplit and
// the tile keeps at least kMinTileFlops. Measured on a 2-core EPYC (bench/gemm_vs_openblas.sh):
// fewer, larger tiles run closest to one threaded OpenBLAS call, which shares its packed panels
// between threads where independent tile calls each pack their own.
constexpr int kMinSplit = 64;
constexpr double kMinTileFlops = 1 << 19;

int target_tiles() {
  static const int tiles = std::clamp(2 * int(std::thread::hardware_concurrency()), 4, 128);
  return tiles;
}

struct Tiling {
  int rows = 0, cols = 0;  // of one tile (the last ones along each axis may be smaller)
  int row_tiles = 1, col_tiles = 1;
  int count() const { return row_tiles * col_tiles; }
};

int half_of(int x) {
  return ((x + 1) / 2 + 15) / 16 * 16;
}  // rounded up to 16 for the kernels

Tiling tiling_of(int m, int n, int k) {
  Tiling t{m, n, 1, 1};
  for (;;) {
    const bool split_rows = t.rows >= t.cols;
    const int side = split_rows ? t.rows : t.cols;
    if (t.count() >= target_tiles() || side < kMinSplit ||
        2.0 * t.rows * t.cols * k / 2 < kMinTileFlops)
      break;
    if (split_rows) {
      t.rows = half_of(t.rows);
      t.row_tiles = (m + t.rows - 1) / t.rows;
    } else {
      t.cols = half_of(t.cols);
      t.col_tiles = (n + t.cols - 1) / t.cols;
    }
  }
  return t;
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc) {
  if (m == 0 || n == 0) return;
  const Tiling t = tiling_of(m, n, k);
  auto tile = [&](int index) {
    const int r0 = index / t.col_tiles * t.rows, c0 = index % t.col_tiles * t.cols;
    const int rows = std::min(t.rows, m - r0), cols = std::min(t.cols, n - c0);
    // Row r0 of op(A) and column c0 of op(B), whichever way they are stored.
    const float* a0 = trans_a ? a + r0 : a + size_t(r0) * lda;
    const float* b0 = trans_b ? b + size_t(c0) * ldb : b + c0;
    SingleThreadedBlas single;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, rows, cols, k, alpha, a0, lda, b0, ldb, beta,
                c + size_t(r0) * ldc + c0, ldc);
  };
  // Inside another parallel loop (attention's blocks, expert tiles) the tiles run on the calling
  // thread.
  if (t.count() == 1 || omp_in_parallel()) {
    for (int i = 0; i < t.count(); ++i) tile(i);
    return;
  }
#pragma omp parallel for schedule(dynamic, 1)
  for (int i = 0; i < t.count(); ++i) tile(i);
}

void matmul_forward(float* out, const float* in, const float* w, const float* bias, int n, int k,
                    int m) {
  gemm(false, true, n, m, k, 1.0f, in, k, w, k, 0.0f, out, m);
  if (bias) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < m; ++j) out[size_t(i) * m + j] += bias[j];
  }
}

void matmul_backward(float* din, float* dw, float* dbias, const float* dout, const float* in,
                     const float* w, int n, int k, int m) {
  if (din) gemm(false, false, n, k, m, 1.0f, dout, m, w, k, 1.0f, din, k);
  if (dw) gemm(true, false, m, k, n, 1.0f, dout, m, in, k, 1.0f, dw, k);
  if (dbias) {
    std::vector<double> sum(m);
    column_dot(sum.data(), dout, nullptr, nullptr, nullptr, n, m);
    for (int j = 0; j < m; ++j) dbias[j] += float(sum[j]);
  }
}

namespace {

// OpenBLAS does not compute a row of C the same way at every call shape: the kernel's row unrolling
// and its tail handling give a row a different rounding depending on how many rows the call has and
// where the row sits among them (seen with the Haswell kernels, which Debian's OpenBLAS must use on
// some AVX-512 EPYC machines, and with the small-matrix path of the SkylakeX kernels). An expert's
// row count depends on where every other token of the micro-batch was routed, later tokens
// included, so one call per expert let a future token move a past token's output by an ulp: the
// model was not exactly causal. Row-wise products here are therefore always made of calls of
// exactly kRowTile rows. A row's rounding then depends only on its position in its expert's
// segment, which only earlier tokens decide. The last, partial tile goes through a zero-padded
// copy.
constexpr int kRowTile = 64;

// One tile of a row-wise product: rows [r, r + kRowTile) of segment `in` (clipped to `rows`) times
// op(w), op(w) of shape [k, m]: w is [m, k] when trans_w (nn.Linear's forward) and [k, m] otherwise
// (the input gradient). Accumulates into out when beta is 1.
void row_tile_gemm(bool trans_w, int r, int rows, int k, int m, const float* in, const float* w,
                   float beta, float* out) {
  const int ldw = trans_w ? k : m;
  if (r + kRowTile <= rows) {
    gemm(false, trans_w, kRowTile, m, k, 1.0f, in + size_t(r) * k, k, w, ldw, beta,
         out + size_t(r) * m, m);
    return;
  }
  const int rest = rows - r;
  thread_local std::vector<float> a, c;  // kept between calls (no page faults each step)
  a.assign(size_t(kRowTile) * k, 0.0f);
  c.assign(size_t(kRowTile) * m, 0.0f);
  std::copy(in + size_t(r) * k, in + size_t(rows) * k, a.begin());
  if (beta != 0.0f) std::copy(out + size_t(r) * m, out + size_t(rows) * m, c.begin());
  gemm(false, trans_w, kRowTile, m, k, 1.0f, a.data(), k, w, ldw, beta, c.data(), m);
  std::copy(c.begin(), c.begin() + size_t(rest) * m, out + size_t(r) * m);
}

struct RowTile {
  int group, row;  // the tile's first row, counted from its group's first
};

// Every group's row tiles, in group order: one parallel loop runs them all (one barrier for all
// experts instead of one per tile), each tile on one thread.
std::vector<RowTile> row_tiles(const int* offsets, int groups) {
  std::vector<RowTile> tiles;
  for (int g = 0; g < groups; ++g)
    for (int r = 0; r < offsets[g + 1] - offsets[g]; r += kRowTile) tiles.push_back({g, r});
  return tiles;
}

}  // namespace

void grouped_matmul_forward(float* out, const float* in, const float* const* weights,
                            const int* offsets, int groups, int k, int m) {
  const std::vector<RowTile> tiles = row_tiles(offsets, groups);
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t i = 0; i < tiles.size(); ++i) {
    const int g = tiles[i].group;
    const size_t first = size_t(offsets[g]);
    row_tile_gemm(true, tiles[i].row, offsets[g + 1] - offsets[g], k, m, in + first * k, weights[g],
                  0.0f, out + first * m);
  }
}

void grouped_matmul_backward(float* din, float* const* dweights, const float* dout, const float* in,
                             const float* const* weights, const int* offsets, int groups, int k,
                             int m) {
  // din is row-wise like the forward (a token's input gradient does not depend on the segment's
  // size); dw sums over the segment's rows and is one product per group.
  if (din) {
    const std::vector<RowTile> tiles = row_tiles(offsets, groups);
#pragma omp parallel for schedule(dynamic, 1)
    for (size_t i = 0; i < tiles.size(); ++i) {
      const int g = tiles[i].group;
      const size_t first = size_t(offsets[g]);
      row_tile_gemm(false, tiles[i].row, offsets[g + 1] - offsets[g], m, k, dout + first * m,
                    weights[g], 1.0f, din + first * k);
    }
  }
  if (!dweights) return;
  for (int g = 0; g < groups; ++g) {
    const int rows = offsets[g + 1] - offsets[g];
    if (rows == 0) continue;
    const size_t first = size_t(offsets[g]);
    gemm(true, false, m, k, rows, 1.0f, dout + first * m, m, in + first * k, k, 1.0f, dweights[g],
         k);
  }
}

}  // namespace zaya::cpu
