// Causal grouped-query attention (cpu::attention_forward / attention_backward), one warp per
// query row: the lanes split the head dimension, scores are warp sums (a fixed butterfly), and
// the softmax runs online over the keys (FlashAttention's rule), so no seq × seq matrix exists.
// The backward recomputes the probabilities from the saved log-sum-exp; dq is written by the
// query's warp and dk, dv by the key's warp (looping the queries of its head group in order):
// every gradient element has one writer and one order, no atomics.
//
// This is the correctness kernel: one row per warp, keys read from global memory. Tiling keys
// through shared memory (and bf16 tensor cores) is the performance work still to do.
#include "backend/cuda/device.h"
#include "backend/cuda/ops.h"
#include "backend/cuda/reduce.cuh"

namespace zaya::cuda {

namespace {

constexpr int kMaxDimPerLane = 8;  // head dims up to 8 · warp size (256 on NVIDIA)
constexpr int kWarpsPerBlock = 4;

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

// The row (sequence b, head h of `heads`, position i) of this thread's warp, and its lane.
struct WarpRow {
  int b, h, i, lane;
};
__device__ inline WarpRow warp_row(int heads, const Shape& s) {
  const long row = long(blockIdx.x) * kWarpsPerBlock + threadIdx.x / ZAYA_WARP_SIZE;
  return WarpRow{int(row / (long(s.seq) * heads)), int((row / s.seq) % heads), int(row % s.seq),
                 int(threadIdx.x % ZAYA_WARP_SIZE)};
}

__device__ inline float row_dot(const float* a, const float* b, int d) {
  float s = 0.0f;
  for (int c = threadIdx.x % ZAYA_WARP_SIZE; c < d; c += ZAYA_WARP_SIZE) s += a[c] * b[c];
  return warp_sum(s);
}

__global__ void attention_forward_kernel(float* out, float* lse, const float* q, const float* k,
                                         const float* v, Shape s) {
  const WarpRow r = warp_row(s.nq, s);
  if (r.b >= s.batch) return;
  const int i = r.i, h = r.h, b = r.b, kvh = h / (s.nq / s.nk), lane = r.lane;
  const float* qi = q + s.q_row(b, i, h);
  float acc[kMaxDimPerLane] = {};
  float m = -INFINITY, l = 0.0f;
  for (int j = 0; j <= i; ++j) {
    const float score = row_dot(qi, k + s.k_row(b, j, kvh), s.d) * s.scale;
    const float m_new = fmaxf(m, score);
    const float correction = expf(m - m_new), p = expf(score - m_new);
    l = l * correction + p;
    const float* vj = v + s.k_row(b, j, kvh);
    for (int t = 0, c = lane; c < s.d; ++t, c += ZAYA_WARP_SIZE)
      acc[t] = acc[t] * correction + p * vj[c];
    m = m_new;
  }
  float* oi = out + s.q_row(b, i, h);
  for (int t = 0, c = lane; c < s.d; ++t, c += ZAYA_WARP_SIZE) oi[c] = acc[t] / l;
  if (lane == 0) lse[(size_t(b) * s.nq + h) * s.seq + i] = m + logf(l);
}

// D[b, h, i] = Σ_c dout·out, then dq[i] += Σ_j ds_ij·k_j·scale with ds = p·(dout·v_j − D).
__global__ void attention_dq_kernel(float* dq, float* D, const float* dout, const float* out,
                                    const float* lse, const float* q, const float* k,
                                    const float* v, Shape s) {
  const WarpRow r = warp_row(s.nq, s);
  if (r.b >= s.batch) return;
  const int i = r.i, h = r.h, b = r.b, kvh = h / (s.nq / s.nk), lane = r.lane;
  const float* qi = q + s.q_row(b, i, h);
  const float* doi = dout + s.q_row(b, i, h);
  const float di = row_dot(doi, out + s.q_row(b, i, h), s.d);
  const float li = lse[(size_t(b) * s.nq + h) * s.seq + i];
  if (lane == 0) D[(size_t(b) * s.nq + h) * s.seq + i] = di;
  float acc[kMaxDimPerLane] = {};
  for (int j = 0; j <= i; ++j) {
    const float* kj = k + s.k_row(b, j, kvh);
    const float p = expf(row_dot(qi, kj, s.d) * s.scale - li);
    const float ds = p * (row_dot(doi, v + s.k_row(b, j, kvh), s.d) - di);
    for (int t = 0, c = lane; c < s.d; ++t, c += ZAYA_WARP_SIZE) acc[t] += ds * kj[c];
  }
  if (dq) {
    float* dqi = dq + s.q_row(b, i, h);
    for (int t = 0, c = lane; c < s.d; ++t, c += ZAYA_WARP_SIZE) dqi[c] += acc[t] * s.scale;
  }
}

// dk[j] += Σ_{h in group} Σ_{i ≥ j} ds_ij·q_i·scale;  dv[j] += Σ p_ij·dout_i.
__global__ void attention_dkv_kernel(float* dk, float* dv, const float* D, const float* dout,
                                     const float* lse, const float* q, const float* k,
                                     const float* v, Shape s) {
  const WarpRow r = warp_row(s.nk, s);
  if (r.b >= s.batch) return;
  const int j = r.i, kvh = r.h, b = r.b, group = s.nq / s.nk, lane = r.lane;
  const float* kj = k + s.k_row(b, j, kvh);
  const float* vj = v + s.k_row(b, j, kvh);
  float ak[kMaxDimPerLane] = {}, av[kMaxDimPerLane] = {};
  for (int h = kvh * group; h < (kvh + 1) * group; ++h)
    for (int i = j; i < s.seq; ++i) {
      const float* qi = q + s.q_row(b, i, h);
      const float* doi = dout + s.q_row(b, i, h);
      const size_t at = (size_t(b) * s.nq + h) * s.seq + i;
      const float p = expf(row_dot(qi, kj, s.d) * s.scale - lse[at]);
      const float ds = p * (row_dot(doi, vj, s.d) - D[at]);
      for (int t = 0, c = lane; c < s.d; ++t, c += ZAYA_WARP_SIZE) {
        ak[t] += ds * qi[c];
        av[t] += p * doi[c];
      }
    }
  for (int t = 0, c = lane; c < s.d; ++t, c += ZAYA_WARP_SIZE) {
    if (dk) dk[s.k_row(b, j, kvh) + c] += ak[t] * s.scale;
    if (dv) dv[s.k_row(b, j, kvh) + c] += av[t];
  }
}

unsigned row_blocks(long rows) {
  return unsigned((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

Shape shape_of(int batch, int seq, int nq, int nk, int d, float scale) {
  ZAYA_CHECK(d <= kMaxDimPerLane * ZAYA_WARP_SIZE, "cuda attention: head dim ", d, " exceeds ",
             kMaxDimPerLane * ZAYA_WARP_SIZE);
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
  attention_forward_kernel<<<row_blocks(rows), kWarpsPerBlock * ZAYA_WARP_SIZE>>>(out, lse, q, k, v,
                                                                                  s);
  ZAYA_CUDA_LAUNCHED("attention_forward");
}

void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* out,
                        const float* lse, const float* q, const float* k, const float* v, int batch,
                        int seq, int nq, int nk, int d, float scale) {
  const Shape s = shape_of(batch, seq, nq, nk, d, scale);
  const long q_rows = long(batch) * nq * seq, k_rows = long(batch) * nk * seq;
  if (q_rows == 0) return;
  ScratchBuffer<float> D{size_t(q_rows)};
  attention_dq_kernel<<<row_blocks(q_rows), kWarpsPerBlock * ZAYA_WARP_SIZE>>>(
      dq, D.get(), dout, out, lse, q, k, v, s);
  ZAYA_CUDA_LAUNCHED("attention_backward (dq)");
  if (dk || dv) {
    attention_dkv_kernel<<<row_blocks(k_rows), kWarpsPerBlock * ZAYA_WARP_SIZE>>>(
        dk, dv, D.get(), dout, lse, q, k, v, s);
    ZAYA_CUDA_LAUNCHED("attention_backward (dk, dv)");
  }
}

}  // namespace zaya::cuda
