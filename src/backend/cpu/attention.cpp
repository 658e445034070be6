#include "backend/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "backend/cpu/fast_exp.h"
#include "backend/cpu/matmul.h"

ZAYA_CPU_TARGET_BEGIN
namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

namespace {

constexpr int kBlock = 64;

// Views of one (batch, head) slice: row t of head h starts at base + t * row_stride.
struct HeadView {
  const float* base;
  int stride;
  const float* row(int t) const { return base + size_t(t) * stride; }
};

// scores[i - q0][j - k0] = scale · q_i·k_j for i in [q0, q1), j in [k0, k1); with `causal`
// (queries and keys at the same positions) j > i is masked to -inf.
void block_scores(float* s, HeadView q, HeadView k, int q0, int q1, int k0, int k1, int d,
                  float scale, bool causal) {
  const int bq = q1 - q0, bk = k1 - k0;
  gemm(false, true, bq, bk, d, scale, q.row(q0), q.stride, k.row(k0), k.stride, 0.0f, s, bk);
  if (!causal) return;
  for (int i = q0; i < q1; ++i)
    for (int j = std::max(k0, i + 1); j < k1; ++j) s[size_t(i - q0) * bk + (j - k0)] = -INFINITY;
}

AttentionBlock square_causal(int batch, int seq, int nq, int nk, int d, float scale) {
  AttentionBlock blk;
  blk.batch = batch;
  blk.q_len = blk.k_len = seq;
  blk.nq = nq;
  blk.nk = nk;
  blk.d = d;
  blk.q_batch_stride = size_t(seq) * nq * d;
  blk.kv_batch_stride = size_t(seq) * nk * d;
  blk.causal = true;
  blk.scale = scale;
  return blk;
}

}  // namespace

void attention_block_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                             const AttentionBlock& blk) {
  const int nq = blk.nq, nk = blk.nk, d = blk.d, group = nq / nk;
  const int qblocks = (blk.q_len + kBlock - 1) / kBlock;
#pragma omp parallel
  {
    std::vector<float> s(kBlock * kBlock), acc(size_t(kBlock) * d), m(kBlock), l(kBlock);
#pragma omp for collapse(3) schedule(dynamic)
    for (int b = 0; b < blk.batch; ++b) {
      for (int h = 0; h < nq; ++h) {
        for (int qb = 0; qb < qblocks; ++qb) {
          const int kh = h / group;
          HeadView Q{q + size_t(b) * blk.q_batch_stride + size_t(h) * d, nq * d};
          HeadView K{k + size_t(b) * blk.kv_batch_stride + size_t(kh) * d, nk * d};
          HeadView V{v + size_t(b) * blk.kv_batch_stride + size_t(kh) * d, nk * d};
          const int q0 = qb * kBlock, q1 = std::min(blk.q_len, q0 + kBlock), bq = q1 - q0;
          const int k_end = blk.causal ? q1 : blk.k_len;
          std::fill(m.begin(), m.end(), -INFINITY);
          std::fill(l.begin(), l.end(), 0.0f);
          std::fill(acc.begin(), acc.end(), 0.0f);
          for (int k0 = 0; k0 < k_end; k0 += kBlock) {
            const int k1 = std::min(k_end, k0 + kBlock), bk = k1 - k0;
            block_scores(s.data(), Q, K, q0, q1, k0, k1, d, blk.scale, blk.causal);
            for (int i = 0; i < bq; ++i) {
              float* row = s.data() + size_t(i) * bk;
              float mx = m[i];
              for (int j = 0; j < bk; ++j) mx = std::max(mx, row[j]);
              const float correction = fast_exp(m[i] - mx);  // 0 on the first block (m = -inf)
              // The exponentials vectorised, then summed in column order.
              for (int j = 0; j < bk; ++j) row[j] = fast_exp(row[j] - mx);
              float sum = 0.0f;
              for (int j = 0; j < bk; ++j) sum += row[j];
              l[i] = l[i] * correction + sum;
              m[i] = mx;
              float* a = acc.data() + size_t(i) * d;
              for (int c = 0; c < d; ++c) a[c] *= correction;
            }
            // acc += P · V_block
            gemm(false, false, bq, d, bk, 1.0f, s.data(), bk, V.row(k0), V.stride, 1.0f, acc.data(),
                 d);
          }
          for (int i = 0; i < bq; ++i) {
            float* o = out + size_t(b) * blk.q_batch_stride + (size_t(q0 + i) * nq + h) * d;
            const float inv = 1.0f / l[i];
            for (int c = 0; c < d; ++c) o[c] = acc[size_t(i) * d + c] * inv;
            lse[(size_t(b) * nq + h) * blk.q_len + q0 + i] = m[i] + std::log(l[i]);
          }
        }
      }
    }
  }
}

void attention_row_dot(float* D, const float* dout, const float* out, const AttentionBlock& blk) {
  const int nq = blk.nq, d = blk.d;
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < blk.batch; ++b)
    for (int t = 0; t < blk.q_len; ++t)
      for (int h = 0; h < nq; ++h) {
        const size_t row = size_t(b) * blk.q_batch_stride + (size_t(t) * nq + h) * d;
        float s = 0.0f;
        for (int c = 0; c < d; ++c) s += dout[row + c] * out[row + c];
        D[(size_t(b) * nq + h) * blk.q_len + t] = s;
      }
}

void attention_block_backward(float* dq, float* dk, float* dv, const float* dout, const float* D,
                              const float* lse, const float* q, const float* k, const float* v,
                              const AttentionBlock& blk) {
  const int nq = blk.nq, nk = blk.nk, d = blk.d, group = nq / nk;
  const int q_len = blk.q_len, k_len = blk.k_len;
  const size_t qs = blk.q_batch_stride, ks = blk.kv_batch_stride;
  const float scale = blk.scale;

  // P = exp(S − lse); dP = dO·Vᵀ; dS = P ⊙ (dP − D). Fills p and ds for one block pair.
  auto probs_and_dscores = [&](float* p, float* ds, int b, int h, int q0, int q1, int k0, int k1) {
    const int kh = h / group, bq = q1 - q0, bk = k1 - k0;
    HeadView Q{q + size_t(b) * qs + size_t(h) * d, nq * d};
    HeadView K{k + size_t(b) * ks + size_t(kh) * d, nk * d};
    HeadView V{v + size_t(b) * ks + size_t(kh) * d, nk * d};
    HeadView dO{dout + size_t(b) * qs + size_t(h) * d, nq * d};
    block_scores(p, Q, K, q0, q1, k0, k1, d, scale, blk.causal);
    gemm(false, true, bq, bk, d, 1.0f, dO.row(q0), dO.stride, V.row(k0), V.stride, 0.0f, ds, bk);
    const float* L = lse + (size_t(b) * nq + h) * q_len;
    const float* Dh = D + (size_t(b) * nq + h) * q_len;
    for (int i = 0; i < bq; ++i)
      for (int j = 0; j < bk; ++j) {
        const size_t e = size_t(i) * bk + j;
        p[e] = fast_exp(p[e] - L[q0 + i]);
        ds[e] = p[e] * (ds[e] - Dh[q0 + i]);
      }
  };

  // Pass 1: dQ for each (batch, query head, query block). Two passes so that every gradient
  // element is written by one thread in a fixed order: deterministic, no atomics.
  if (dq) {
    const int qblocks = (q_len + kBlock - 1) / kBlock;
#pragma omp parallel
    {
      std::vector<float> p(kBlock * kBlock), ds(kBlock * kBlock);
#pragma omp for collapse(3) schedule(dynamic)
      for (int b = 0; b < blk.batch; ++b)
        for (int h = 0; h < nq; ++h)
          for (int qb = 0; qb < qblocks; ++qb) {
            const int q0 = qb * kBlock, q1 = std::min(q_len, q0 + kBlock);
            const int k_end = blk.causal ? q1 : k_len;
            const int kh = h / group;
            const float* Kb = k + size_t(b) * ks + size_t(kh) * d;
            float* dQ = dq + size_t(b) * qs + size_t(h) * d;
            for (int k0 = 0; k0 < k_end; k0 += kBlock) {
              const int k1 = std::min(k_end, k0 + kBlock);
              probs_and_dscores(p.data(), ds.data(), b, h, q0, q1, k0, k1);
              gemm(false, false, q1 - q0, d, k1 - k0, scale, ds.data(), k1 - k0,
                   Kb + size_t(k0) * nk * d, nk * d, 1.0f, dQ + size_t(q0) * nq * d, nq * d);
            }
          }
    }
  }

  // Pass 2: dK, dV for each (batch, KV head, key block), summing over the group's query heads.
  if (dk || dv) {
    const int kblocks = (k_len + kBlock - 1) / kBlock;
#pragma omp parallel
    {
      std::vector<float> p(kBlock * kBlock), ds(kBlock * kBlock);
#pragma omp for collapse(3) schedule(dynamic)
      for (int b = 0; b < blk.batch; ++b)
        for (int kh = 0; kh < nk; ++kh)
          for (int kb = 0; kb < kblocks; ++kb) {
            const int k0 = kb * kBlock, k1 = std::min(k_len, k0 + kBlock), bk = k1 - k0;
            float* dK = dk ? dk + size_t(b) * ks + (size_t(k0) * nk + kh) * d : nullptr;
            float* dV = dv ? dv + size_t(b) * ks + (size_t(k0) * nk + kh) * d : nullptr;
            for (int h = kh * group; h < (kh + 1) * group; ++h) {
              const float* Qh = q + size_t(b) * qs + size_t(h) * d;
              const float* dOh = dout + size_t(b) * qs + size_t(h) * d;
              for (int q0 = blk.causal ? k0 / kBlock * kBlock : 0; q0 < q_len; q0 += kBlock) {
                const int q1 = std::min(q_len, q0 + kBlock), bq = q1 - q0;
                probs_and_dscores(p.data(), ds.data(), b, h, q0, q1, k0, k1);
                if (dV)  // dV += Pᵀ · dO
                  gemm(true, false, bk, d, bq, 1.0f, p.data(), bk, dOh + size_t(q0) * nq * d,
                       nq * d, 1.0f, dV, nk * d);
                if (dK)  // dK += scale · dSᵀ · Q
                  gemm(true, false, bk, d, bq, scale, ds.data(), bk, Qh + size_t(q0) * nq * d,
                       nq * d, 1.0f, dK, nk * d);
              }
            }
          }
    }
  }
}

void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                       int batch, int seq, int nq, int nk, int d, float scale) {
  attention_block_forward(out, lse, q, k, v, square_causal(batch, seq, nq, nk, d, scale));
}

void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* out,
                        const float* lse, const float* q, const float* k, const float* v, int batch,
                        int seq, int nq, int nk, int d, float scale) {
  const AttentionBlock blk = square_causal(batch, seq, nq, nk, d, scale);
  std::vector<float> D(size_t(batch) * nq * seq);
  attention_row_dot(D.data(), dout, out, blk);
  attention_block_backward(dq, dk, dv, dout, D.data(), lse, q, k, v, blk);
}

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
ZAYA_CPU_TARGET_END
