// Causal grouped-query attention (cpu::attention_forward / attention_backward). Each query row
// is handled by one warp: the lanes split the head dimension, scores are warp sums (a fixed
// butterfly), and the softmax runs online over the keys (FlashAttention's rule), so no seq × seq
// matrix exists. The backward recomputes the probabilities from the saved log-sum-exp; dq is
// written by the query's warp and dk, dv by the key's warp (looping the queries of its head
// group in order): every gradient element has one writer and one order, no atomics.
//
// The data a warp reads comes through shared memory in tiles. A forward or dq block takes a
// tile of query positions for every query head of one KV group (the rows that share those
// keys), keeps each row's query (and output gradient) in registers, and loads each tile of keys
// and values once for all of them. Registers, not local memory: the per-row arrays are indexed
// only by compile-time constants (the row and element loops are unrolled, and a kernel is
// instantiated per kDims, a lane's elements of a row), which ctest cuda.ptxas holds every kernel
// to (a zero stack frame).
// Groups of up to 64 query heads per KV head are supported. A dk/dv block keeps a tile of key rows
// the same way and loads
// the group's queries and output gradients tile by tile. Each row still visits its terms one by
// one in the same order, so the results are bitwise those of one warp per row reading global
// memory. bf16 tensor cores are the performance work still to do.
#include <algorithm>
#include <type_traits>

#include "backend/cuda/device.h"
#include "backend/cuda/ops.h"
#include "backend/cuda/reduce.cuh"

namespace zaya::cuda {

namespace {

constexpr int kMaxDimPerLane = 8;  // head dims up to 8 · warp size (256 on NVIDIA)

// A lane's elements of a row (lane, lane + warp, ...) for head dim d: 1, 2, 4 or 8, the kernels'
// kDims.
inline int dims_per_lane(int d) {
  const int n = (d + ZAYA_WARP_SIZE - 1) / ZAYA_WARP_SIZE;
  return n <= 1 ? 1 : n <= 2 ? 2 : n <= 4 ? 4 : kMaxDimPerLane;
}

// launch(std::integral_constant<int, kDims>{}) for d's kDims.
template <typename Launch>
void with_dims_per_lane(int d, Launch&& launch) {
  switch (dims_per_lane(d)) {
    case 1:
      return launch(std::integral_constant<int, 1>{});
    case 2:
      return launch(std::integral_constant<int, 2>{});
    case 4:
      return launch(std::integral_constant<int, 4>{});
    default:
      return launch(std::integral_constant<int, kMaxDimPerLane>{});
  }
}

struct Shape {
  int batch, seq, nq, nk, d;
  float scale;
  __device__ size_t q_row(int b, int i, int h) const {
    return ((size_t(b) * seq + i) * nq + h) * d;
  }
  __device__ size_t k_row(int b, int j, int h) const {
    return ((size_t(b) * seq + j) * nk + h) * d;
  }
};

// The tiled kernels' blocks: kTileWarps warps, each holding up to kRowsPerWarp query rows.
constexpr int kTileWarps = 8;
constexpr int kRowsPerWarp = 8;
// Shared floats per key/value tile: two tiles take 48 KiB, the most a launch gets without
// opting in (cudaFuncSetAttribute); a static __shared__ array added to these kernels would
// need that, or smaller tiles.
constexpr int kTileFloats = 6144;

// A block's rows: tq positions × the `group` query heads of one KV head.
struct QueryTile {
  int b, kvh, i0, tq, group;
  // Row r of the block (r = warp + kTileWarps · t): position i0 + r / group, head kvh·group + r %
  // group.
  __device__ int position(int r) const { return i0 + r / group; }
  __device__ int head(int r) const { return kvh * group + r % group; }
};

__device__ inline QueryTile query_tile(const Shape& s, int tq) {
  const int tiles = (s.seq + tq - 1) / tq;
  const int blk = int(blockIdx.x);
  return QueryTile{blk / (tiles * s.nk), (blk / tiles) % s.nk, (blk % tiles) * tq, tq, s.nq / s.nk};
}

// Keys [j0, j0 + n) of (b, kvh) into shared memory: rows of d floats, for K and V.
__device__ inline void load_key_tile(float* ks, float* vs, const float* k, const float* v,
                                     const Shape& s, int b, int kvh, int j0, int n) {
  for (int e = int(threadIdx.x); e < n * s.d; e += int(blockDim.x)) {
    const int jj = e / s.d, c = e % s.d;
    ks[e] = k[s.k_row(b, j0 + jj, kvh) + c];
    vs[e] = v[s.k_row(b, j0 + jj, kvh) + c];
  }
}

// Column of a lane's element e of a row.
__device__ inline int lane_column(int e) {
  return int(threadIdx.x % ZAYA_WARP_SIZE) + e * ZAYA_WARP_SIZE;
}

// This lane's share of a row (elements lane, lane + warp, ...) into registers.
template <int kDims>
__device__ inline void load_lanes(float (&dst)[kDims], const float* row, int d) {
#pragma unroll
  for (int e = 0; e < kDims; ++e) dst[e] = lane_column(e) < d ? row[lane_column(e)] : 0.0f;
}

// a·b over the head dimension with a in registers: each lane sums its elements (lane, lane +
// warp, ...) in order, then the warp adds the lanes by a fixed butterfly.
template <int kDims>
__device__ inline float lanes_dot(const float (&mine)[kDims], const float* row, int d) {
  float s = 0.0f;
#pragma unroll
  for (int e = 0; e < kDims; ++e)
    if (lane_column(e) < d) s += mine[e] * row[lane_column(e)];
  return warp_sum(s);
}

template <int kDims>
__global__ void attention_forward_kernel(float* out, float* lse, const float* q, const float* k,
                                         const float* v, Shape s, int tq, int tile_keys) {
  ZAYA_DYNAMIC_SHARED(float, shared);
  float* ks = shared;
  float* vs = shared + size_t(tile_keys) * s.d;
  const QueryTile qt = query_tile(s, tq);
  const int warp = int(threadIdx.x) / ZAYA_WARP_SIZE;
  const int rows = tq * qt.group;
  const int last = min(qt.i0 + tq, s.seq) - 1;  // the tile's last position
  float qr[kRowsPerWarp][kDims], acc[kRowsPerWarp][kDims];
  float m[kRowsPerWarp], l[kRowsPerWarp];
#pragma unroll
  for (int t = 0; t < kRowsPerWarp; ++t) {
    m[t] = -INFINITY;
    l[t] = 0.0f;
#pragma unroll
    for (int e = 0; e < kDims; ++e) acc[t][e] = qr[t][e] = 0.0f;
    const int r = warp + kTileWarps * t;
    if (r < rows && qt.position(r) < s.seq)
      load_lanes(qr[t], q + s.q_row(qt.b, qt.position(r), qt.head(r)), s.d);
  }
  for (int j0 = 0; j0 <= last; j0 += tile_keys) {
    const int n = min(tile_keys, last + 1 - j0);
    __syncthreads();  // every warp is done with the previous tile
    load_key_tile(ks, vs, k, v, s, qt.b, qt.kvh, j0, n);
    __syncthreads();
#pragma unroll
    for (int t = 0; t < kRowsPerWarp; ++t) {
      const int r = warp + kTileWarps * t;  // the same for every lane: the branch is uniform
      if (r >= rows || qt.position(r) >= s.seq) continue;
      const int end = min(n, qt.position(r) - j0 + 1);  // keys j ≤ i
      for (int jj = 0; jj < end; ++jj) {
        const float score = lanes_dot(qr[t], ks + size_t(jj) * s.d, s.d) * s.scale;
        const float m_new = fmaxf(m[t], score);
        const float correction = expf(m[t] - m_new), p = expf(score - m_new);
        l[t] = l[t] * correction + p;
        const float* vj = vs + size_t(jj) * s.d;
#pragma unroll
        for (int e = 0; e < kDims; ++e)
          if (lane_column(e) < s.d) acc[t][e] = acc[t][e] * correction + p * vj[lane_column(e)];
        m[t] = m_new;
      }
    }
  }
#pragma unroll
  for (int t = 0; t < kRowsPerWarp; ++t) {
    const int r = warp + kTileWarps * t;
    const int i = qt.position(r), h = qt.head(r);
    if (r >= rows || i >= s.seq) continue;
    float* oi = out + s.q_row(qt.b, i, h);
#pragma unroll
    for (int e = 0; e < kDims; ++e)
      if (lane_column(e) < s.d) oi[lane_column(e)] = acc[t][e] / l[t];
    if (threadIdx.x % ZAYA_WARP_SIZE == 0)
      lse[(size_t(qt.b) * s.nq + h) * s.seq + i] = m[t] + logf(l[t]);
  }
}

// D[b, h, i] = Σ_c dout·out, then dq[i] += Σ_j ds_ij·k_j·scale with ds = p·(dout·v_j − D),
// the keys tiled as in the forward.
template <int kDims>
__global__ void attention_dq_kernel(float* dq, float* D, const float* dout, const float* out,
                                    const float* lse, const float* q, const float* k,
                                    const float* v, Shape s, int tq, int tile_keys) {
  ZAYA_DYNAMIC_SHARED(float, shared);
  float* ks = shared;
  float* vs = shared + size_t(tile_keys) * s.d;
  const QueryTile qt = query_tile(s, tq);
  const int warp = int(threadIdx.x) / ZAYA_WARP_SIZE;
  const int rows = tq * qt.group;
  const int last = min(qt.i0 + tq, s.seq) - 1;
  float qr[kRowsPerWarp][kDims], dor[kRowsPerWarp][kDims], acc[kRowsPerWarp][kDims];
  float di[kRowsPerWarp], li[kRowsPerWarp];
#pragma unroll
  for (int t = 0; t < kRowsPerWarp; ++t) {
#pragma unroll
    for (int e = 0; e < kDims; ++e) acc[t][e] = qr[t][e] = dor[t][e] = 0.0f;
    di[t] = li[t] = 0.0f;
    const int r = warp + kTileWarps * t;
    if (r >= rows || qt.position(r) >= s.seq) continue;
    const int i = qt.position(r), h = qt.head(r);
    load_lanes(qr[t], q + s.q_row(qt.b, i, h), s.d);
    load_lanes(dor[t], dout + s.q_row(qt.b, i, h), s.d);
    di[t] = lanes_dot(dor[t], out + s.q_row(qt.b, i, h), s.d);
    const size_t at = (size_t(qt.b) * s.nq + h) * s.seq + i;
    li[t] = lse[at];
    if (threadIdx.x % ZAYA_WARP_SIZE == 0) D[at] = di[t];
  }
  for (int j0 = 0; j0 <= last; j0 += tile_keys) {
    const int n = min(tile_keys, last + 1 - j0);
    __syncthreads();
    load_key_tile(ks, vs, k, v, s, qt.b, qt.kvh, j0, n);
    __syncthreads();
#pragma unroll
    for (int t = 0; t < kRowsPerWarp; ++t) {
      const int r = warp + kTileWarps * t;
      if (r >= rows || qt.position(r) >= s.seq) continue;
      const int end = min(n, qt.position(r) - j0 + 1);
      for (int jj = 0; jj < end; ++jj) {
        const float* kj = ks + size_t(jj) * s.d;
        const float p = expf(lanes_dot(qr[t], kj, s.d) * s.scale - li[t]);
        const float ds = p * (lanes_dot(dor[t], vs + size_t(jj) * s.d, s.d) - di[t]);
#pragma unroll
        for (int e = 0; e < kDims; ++e)
          if (lane_column(e) < s.d) acc[t][e] += ds * kj[lane_column(e)];
      }
    }
  }
  if (!dq) return;
#pragma unroll
  for (int t = 0; t < kRowsPerWarp; ++t) {
    const int r = warp + kTileWarps * t;
    if (r >= rows || qt.position(r) >= s.seq) continue;
    float* dqi = dq + s.q_row(qt.b, qt.position(r), qt.head(r));
#pragma unroll
    for (int e = 0; e < kDims; ++e)
      if (lane_column(e) < s.d) dqi[lane_column(e)] += acc[t][e] * s.scale;
  }
}

// dk[j] += Σ_{h in group} Σ_{i ≥ j} ds_ij·q_i·scale;  dv[j] += Σ p_ij·dout_i. A block takes
// kTileWarps · kKeyRowsPerWarp key positions of one KV head, keeps each row's key and value in
// registers, and walks the group's query heads and then the later positions in shared-memory
// tiles of queries and output gradients: per key row, the same terms in the same order as one
// warp per row reading global memory.
constexpr int kKeyRowsPerWarp = 4;

// The group's queries and output gradients at positions [i0, i0 + n) of head h, and their lse
// and D, into shared memory.
__device__ inline void load_query_tile(float* qs, float* dos, float* ls, float* Ds, const float* q,
                                       const float* dout, const float* lse, const float* D,
                                       const Shape& s, int b, int h, int i0, int n) {
  for (int e = int(threadIdx.x); e < n * s.d; e += int(blockDim.x)) {
    const int ii = e / s.d, c = e % s.d;
    qs[e] = q[s.q_row(b, i0 + ii, h) + c];
    dos[e] = dout[s.q_row(b, i0 + ii, h) + c];
  }
  for (int ii = int(threadIdx.x); ii < n; ii += int(blockDim.x)) {
    const size_t at = (size_t(b) * s.nq + h) * s.seq + i0 + ii;
    ls[ii] = lse[at];
    Ds[ii] = D[at];
  }
}

template <int kDims>
__global__ void attention_dkv_kernel(float* dk, float* dv, const float* D, const float* dout,
                                     const float* lse, const float* q, const float* k,
                                     const float* v, Shape s, int tile_queries) {
  ZAYA_DYNAMIC_SHARED(float, shared);
  float* qs = shared;
  float* dos = shared + size_t(tile_queries) * s.d;
  float* ls = dos + size_t(tile_queries) * s.d;  // lse of the tile's rows
  float* Ds = ls + tile_queries;                 // and their D
  const int keys = kTileWarps * kKeyRowsPerWarp;
  const int tiles = (s.seq + keys - 1) / keys;
  const int blk = int(blockIdx.x);
  const int b = blk / (tiles * s.nk), kvh = (blk / tiles) % s.nk, j0 = (blk % tiles) * keys;
  const int group = s.nq / s.nk;
  const int warp = int(threadIdx.x) / ZAYA_WARP_SIZE;
  float kr[kKeyRowsPerWarp][kDims], vr[kKeyRowsPerWarp][kDims];
  float ak[kKeyRowsPerWarp][kDims], av[kKeyRowsPerWarp][kDims];
#pragma unroll
  for (int t = 0; t < kKeyRowsPerWarp; ++t) {
#pragma unroll
    for (int e = 0; e < kDims; ++e) ak[t][e] = av[t][e] = kr[t][e] = vr[t][e] = 0.0f;
    const int j = j0 + warp + kTileWarps * t;
    if (j >= s.seq) continue;
    load_lanes(kr[t], k + s.k_row(b, j, kvh), s.d);
    load_lanes(vr[t], v + s.k_row(b, j, kvh), s.d);
  }
  for (int h = kvh * group; h < (kvh + 1) * group; ++h)
    for (int i0 = j0; i0 < s.seq; i0 += tile_queries) {
      const int n = min(tile_queries, s.seq - i0);
      __syncthreads();  // every warp is done with the previous tile
      load_query_tile(qs, dos, ls, Ds, q, dout, lse, D, s, b, h, i0, n);
      __syncthreads();
#pragma unroll
      for (int t = 0; t < kKeyRowsPerWarp; ++t) {
        const int j = j0 + warp + kTileWarps * t;  // the same for every lane
        if (j >= s.seq) continue;
        for (int ii = max(0, j - i0); ii < n; ++ii) {  // queries i ≥ j, in order
          const float* qi = qs + size_t(ii) * s.d;
          const float* doi = dos + size_t(ii) * s.d;
          const float p = expf(lanes_dot(kr[t], qi, s.d) * s.scale - ls[ii]);
          const float ds = p * (lanes_dot(vr[t], doi, s.d) - Ds[ii]);
#pragma unroll
          for (int e = 0; e < kDims; ++e)
            if (lane_column(e) < s.d) {
              ak[t][e] += ds * qi[lane_column(e)];
              av[t][e] += p * doi[lane_column(e)];
            }
        }
      }
    }
#pragma unroll
  for (int t = 0; t < kKeyRowsPerWarp; ++t) {
    const int j = j0 + warp + kTileWarps * t;
    if (j >= s.seq) continue;
#pragma unroll
    for (int e = 0; e < kDims; ++e) {
      if (lane_column(e) >= s.d) continue;
      if (dk) dk[s.k_row(b, j, kvh) + lane_column(e)] += ak[t][e] * s.scale;
      if (dv) dv[s.k_row(b, j, kvh) + lane_column(e)] += av[t][e];
    }
  }
}

// The query positions of a tiled block (kTileWarps · kRowsPerWarp rows over the group's heads)
// and the keys of a shared-memory tile; the launch's grid and shared bytes follow.
struct Tiling {
  int tq, tile_keys;
  unsigned blocks;
  size_t shared_bytes;
};
Tiling tiling_of(const Shape& s) {
  const int group = s.nq / s.nk;
  ZAYA_CHECK(group <= kTileWarps * kRowsPerWarp, "cuda attention: ", group,
             " query heads per key/value head exceed ", kTileWarps * kRowsPerWarp);
  Tiling t{};
  t.tq = (kTileWarps * kRowsPerWarp) / group;
  t.tile_keys = std::max(1, std::min(32, kTileFloats / s.d));
  t.blocks = unsigned(long(s.batch) * s.nk * ((s.seq + t.tq - 1) / t.tq));
  t.shared_bytes = 2 * sizeof(float) * size_t(t.tile_keys) * size_t(s.d);
  return t;
}

Shape shape_of(int batch, int seq, int nq, int nk, int d, float scale) {
  ZAYA_CHECK(d > 0 && d <= kMaxDimPerLane * ZAYA_WARP_SIZE, "cuda attention: head dim ", d,
             " is not in 1..", kMaxDimPerLane * ZAYA_WARP_SIZE);
  ZAYA_CHECK(nk > 0 && nq % nk == 0, "cuda attention: ", nq, " query heads are not a multiple of ",
             nk, " key/value heads");
  return Shape{batch, seq, nq, nk, d, scale};
}

}  // namespace

void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                       int batch, int seq, int nq, int nk, int d, float scale) {
  const Shape s = shape_of(batch, seq, nq, nk, d, scale);
  const long rows = long(batch) * nq * seq;
  if (rows == 0) return;
  const Tiling t = tiling_of(s);
  with_dims_per_lane(d, [&](auto dims) {
    ZAYA_LAUNCH(attention_forward_kernel<decltype(dims)::value>, t.blocks,
                kTileWarps * ZAYA_WARP_SIZE, t.shared_bytes, 0)
    (out, lse, q, k, v, s, t.tq, t.tile_keys);
  });
  ZAYA_CUDA_LAUNCHED("attention_forward");
}

void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* out,
                        const float* lse, const float* q, const float* k, const float* v, int batch,
                        int seq, int nq, int nk, int d, float scale) {
  const Shape s = shape_of(batch, seq, nq, nk, d, scale);
  const long q_rows = long(batch) * nq * seq;
  if (q_rows == 0) return;
  ScratchBuffer<float> D{size_t(q_rows)};
  const Tiling t = tiling_of(s);
  with_dims_per_lane(d, [&](auto dims) {
    ZAYA_LAUNCH(attention_dq_kernel<decltype(dims)::value>, t.blocks, kTileWarps * ZAYA_WARP_SIZE,
                t.shared_bytes, 0)
    (dq, D.get(), dout, out, lse, q, k, v, s, t.tq, t.tile_keys);
  });
  ZAYA_CUDA_LAUNCHED("attention_backward (dq)");
  if (dk || dv) {
    const int keys = kTileWarps * kKeyRowsPerWarp;
    const unsigned blocks = unsigned(long(batch) * nk * ((seq + keys - 1) / keys));
    // Two tiles of query rows and their lse and D: within the 48 KiB of kTileFloats pairs.
    const int tile_queries = std::max(1, std::min(32, (kTileFloats - 32) / d));
    const size_t shared_bytes = 2 * sizeof(float) * size_t(tile_queries) * size_t(d + 1);
    with_dims_per_lane(d, [&](auto dims) {
      ZAYA_LAUNCH(attention_dkv_kernel<decltype(dims)::value>, blocks, kTileWarps * ZAYA_WARP_SIZE,
                  shared_bytes, 0)
      (dk, dv, D.get(), dout, lse, q, k, v, s, tile_queries);
    });
    ZAYA_CUDA_LAUNCHED("attention_backward (dk, dv)");
  }
}

void attention_block_forward(float*, float*, const float*, const float*, const float*,
                             const AttentionBlock&) {
  ZAYA_FAIL(
      "not implemented on cuda: attention_block_forward (ring attention's blocks; "
      "context parallelism runs on the CPU backend only)");
}

void attention_row_dot(float*, const float*, const float*, const AttentionBlock&) {
  ZAYA_FAIL(
      "not implemented on cuda: attention_row_dot (ring attention's blocks; context "
      "parallelism runs on the CPU backend only)");
}

void attention_block_backward(float*, float*, float*, const float*, const float*, const float*,
                              const float*, const float*, const float*, const AttentionBlock&) {
  ZAYA_FAIL(
      "not implemented on cuda: attention_block_backward (ring attention's blocks; "
      "context parallelism runs on the CPU backend only)");
}

}  // namespace zaya::cuda
