// The decode steps (backend/cpu/rowwise.h, backend/cpu/decode_ops.h): the row-independent product,
// CCA's convolution step and state advance, and attention over a paged cache; and the
// benchmarks' general product (dense_gemm, through matmul.cu's cuBLASLt entry). Each row's result
// is computed by the same threads whatever the other rows, so a sequence decodes to the same bits
// alone or in a batch, as on the CPU.
#include <cmath>

#include "backend/cuda/gemm.h"
#include "backend/cuda/ops.h"
#include "backend/cuda/reduce.cuh"

namespace zaya::cuda {

namespace {

constexpr int kLanes = 16;

// One thread per output element: cpu::fixed_order_dot's order, 16 running sums over k mod 16
// (lane j adds a[i]·b[i] for i ≡ j), then the fixed tree 16 → 8 → 4 → 2 → 1.
__global__ void rows_matmul_kernel(float* out, const float* in, const float* w, const float* bias,
                                   long total, int k, int m) {
  const long e = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= total) return;
  const long r = e / m;
  const int o = int(e % m);
  const float* a = in + size_t(r) * k;
  const float* b = w + size_t(o) * k;
  float acc[kLanes];
  for (int j = 0; j < kLanes; ++j) acc[j] = 0.0f;
  for (int i = 0; i < k; i += kLanes)
    for (int j = 0; j < kLanes; ++j)
      if (i + j < k) acc[j] += a[i + j] * b[i + j];
  for (int width = kLanes / 2; width >= 4; width /= 2)
    for (int j = 0; j < width; ++j) acc[j] += acc[j + width];
  const float s2a = acc[0] + acc[2], s2b = acc[1] + acc[3];
  float v = s2a + s2b;
  if (bias) v += bias[o];
  out[e] = v;
}

struct CcaDecodeShape {
  int nq, nk, d;
  __device__ int dq() const { return nq * d; }
  __device__ int dk() const { return nk * d; }
  __device__ int c() const { return dq() + dk(); }
  __device__ int p() const { return c() + dk(); }
};

// One block per row; the depthwise rows a[t], a[t+1] in shared memory ([2, C]).
__global__ void cca_decode_conv_kernel(float* z, const float* proj, const float* window,
                                       const int32_t* slots, CcaDecodeStep s) {
  ZAYA_DYNAMIC_SHARED(float, a);
  const CcaDecodeShape sh{s.nq, s.nk, s.d};
  const int r = blockIdx.x, C = sh.c(), d = s.d, g = s.nq / s.nk;
  const float* u = proj + size_t(r) * sh.p();
  const float* u2 = window + size_t(slots[r]) * 2 * C;
  const float* u1 = u2 + C;
  for (int ch = threadIdx.x; ch < C; ch += blockDim.x) {
    const float w0 = s.conv0_w[2 * ch], w1 = s.conv0_w[2 * ch + 1];
    a[ch] = s.conv0_b[ch] + w0 * u2[ch] + w1 * u1[ch];
    a[C + ch] = s.conv0_b[ch] + w0 * u1[ch] + w1 * u[ch];
  }
  __syncthreads();
  const float* q0 = u;
  const float* k0 = u + sh.dq();
  for (int ch = threadIdx.x; ch < C; ch += blockDim.x) {
    const int g0 = ch / d * d;
    const float* wc = s.conv1_w + size_t(ch) * d * 2;
    float s0 = 0.0f, s1 = 0.0f;
    for (int j = 0; j < d; ++j) {
      s0 += wc[2 * j] * a[g0 + j];
      s1 += wc[2 * j + 1] * a[C + g0 + j];
    }
    float zc = s0 + s1 + s.conv1_b[ch];
    if (ch < sh.dq()) {
      const int h = ch / d, i = ch % d;
      zc += 0.5f * (q0[ch] + k0[(h / g) * d + i]);
    } else {
      const int j = (ch - sh.dq()) / d, i = (ch - sh.dq()) % d;
      float mean = 0.0f;
      for (int h = j * g; h < (j + 1) * g; ++h) mean += q0[h * d + i];
      mean /= float(g);
      zc += 0.5f * mean + 0.5f * k0[j * d + i];
    }
    z[size_t(r) * C + ch] = zc;
  }
}

// One block per row; thread j moves element j (and C + j) of the row's state, so every element
// is read and written by one thread.
__global__ void cca_decode_advance_kernel(float* window, float* v_prev, float* kv,
                                          const int64_t* kv_rows, const float* qkn,
                                          const float* proj, const int32_t* slots,
                                          CcaDecodeStep s) {
  const CcaDecodeShape sh{s.nq, s.nk, s.d};
  const int r = blockIdx.x, C = sh.c(), Dk = sh.dk(), half = Dk / 2;
  const float* u = proj + size_t(r) * sh.p();
  float* prev = v_prev + size_t(slots[r]) * half;
  float* w = window + size_t(slots[r]) * 2 * C;
  const bool held = kv_rows[2 * r] >= 0;
  for (int j = threadIdx.x; j < C; j += blockDim.x) {
    if (held && j < Dk) kv[size_t(kv_rows[2 * r]) * Dk + j] = qkn[size_t(r) * C + sh.dq() + j];
    if (j < half) {
      if (held) {
        float* v_slot = kv + size_t(kv_rows[2 * r + 1]) * Dk;
        v_slot[j] = u[C + j];
        v_slot[half + j] = prev[j];
      }
      prev[j] = u[C + half + j];
    }
    w[j] = w[C + j];
    w[C + j] = u[j];
  }
}

// One block per (row, query head): the scores in parallel over positions (each a dot product in
// order of the head dimension), then the max and the sum of exponentials in position order by
// one thread, then each output element in position order by its own thread.
__global__ void kv_partials_kernel(float* max, float* sum, float* out, float* scores,
                                   const float* q, PagedKv kv, int nq, int nk, int d, float scale) {
  __shared__ int held_shared;
  const int item = blockIdx.x, r = item / nq, h = item % nq, j = h / (nq / nk), Dk = nk * d;
  const int bs = kv.block_size;
  const int32_t* blocks = kv.blocks + size_t(r) * kv.max_blocks;
  const int32_t* counts = kv.counts + size_t(r) * kv.max_blocks;
  int held = 0;
  for (int i = 0; i < kv.max_blocks && counts[i] > 0; ++i) held += counts[i];
  const float* qh = q + size_t(r) * nq * d + size_t(h) * d;
  float* score = scores + size_t(item) * kv.max_blocks * bs;
  // Every block of a row but its last is full: position p is row p % bs of block p / bs.
  for (int p = threadIdx.x; p < held; p += blockDim.x) {
    const float* k = kv.keys + size_t(blocks[p / bs]) * size_t(kv.block_stride) +
                     size_t(p % bs) * Dk + size_t(j) * d;
    float dot = 0.0f;
    for (int x = 0; x < d; ++x) dot += qh[x] * k[x];
    score[p] = dot * scale;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float mx = -INFINITY, total = 0.0f;
    for (int p = 0; p < held; ++p) mx = fmaxf(mx, score[p]);
    for (int p = 0; p < held; ++p) total += score[p] = expf(score[p] - mx);
    max[item] = mx;
    sum[item] = total;
    held_shared = held;
  }
  __syncthreads();
  for (int x = threadIdx.x; x < d; x += blockDim.x) {
    float o = 0.0f;
    for (int p = 0; p < held_shared; ++p) {
      const float* v = kv.keys + size_t(blocks[p / bs]) * size_t(kv.block_stride) +
                       size_t(kv.values_offset) + size_t(p % bs) * Dk + size_t(j) * d;
      o += score[p] * v[x];
    }
    out[size_t(item) * d + x] = o;
  }
}

__global__ void kv_normalize_kernel(float* att, const float* sum, const float* out, long total,
                                    int d) {
  const long e = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= total) return;
  att[e] = out[e] * (1.0f / sum[e / d]);
}

}  // namespace

void rows_matmul_forward(float* out, const float* in, const float* w, const float* bias, int n,
                         int k, int m) {
  const long total = long(n) * m;
  if (total <= 0) return;
  ZAYA_LAUNCH(rows_matmul_kernel, blocks_for(total, 128), 128, 0, 0)(out, in, w, bias, total, k, m);
  ZAYA_CUDA_LAUNCHED("rows_matmul_forward");
}

void grouped_rows_matmul_forward(float* out, const float* in, const float* const* weights,
                                 const int* offsets, int groups, int k, int m) {
  // A launch per group with rows: each row gets rows_matmul_forward's bits.
  for (int g = 0; g < groups; ++g) {
    const int first = offsets[g], n = offsets[g + 1] - first;
    if (n > 0)
      rows_matmul_forward(out + size_t(first) * m, in + size_t(first) * k, weights[g], nullptr, n,
                          k, m);
  }
}

void cca_decode_conv(float* z, const float* proj, const float* window, const int32_t* slots,
                     const CcaDecodeStep& s) {
  if (s.n <= 0) return;
  const size_t shared = sizeof(float) * 2 * size_t(s.nq + s.nk) * s.d;
  ZAYA_LAUNCH(cca_decode_conv_kernel, s.n, 128, shared, 0)(z, proj, window, slots, s);
  ZAYA_CUDA_LAUNCHED("cca_decode_conv");
}

void cca_decode_advance(float* window, float* v_prev, float* kv, const int64_t* kv_rows,
                        const float* qkn, const float* proj, const int32_t* slots,
                        const CcaDecodeStep& s) {
  if (s.n <= 0) return;
  ZAYA_LAUNCH(cca_decode_advance_kernel, s.n, 128, 0, 0)
  (window, v_prev, kv, kv_rows, qkn, proj, slots, s);
  ZAYA_CUDA_LAUNCHED("cca_decode_advance");
}

void kv_attention_partials(float* max, float* sum, float* out, float* scores, const float* q,
                           const PagedKv& kv, int n, int nq, int nk, int d) {
  if (n <= 0) return;
  const float scale = float(1.0 / std::sqrt(double(d)));
  ZAYA_LAUNCH(kv_partials_kernel, n * nq, 128, 0, 0)
  (max, sum, out, scores, q, kv, nq, nk, d, scale);
  ZAYA_CUDA_LAUNCHED("kv_attention_partials");
}

// Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: the operands swap.
void dense_gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  gemm_f32_batched(trans_b, trans_a, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc, GemmBatch{});
}

void kv_attention_normalize(float* att, const float* sum, const float* out, int items, int d) {
  const long total = long(items) * d;
  if (total <= 0) return;
  ZAYA_LAUNCH(kv_normalize_kernel, blocks_for(total, 256), 256, 0, 0)(att, sum, out, total, d);
  ZAYA_CUDA_LAUNCHED("kv_attention_normalize");
}

}  // namespace zaya::cuda
