#include "model/ring_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <utility>

namespace zaya {

namespace {

constexpr int kTagForward = 7401, kTagKv = 7402, kTagGrad = 7403;

// The ring's view of the group: who holds what, and the sizes of the travelling buffers.
struct Ring {
  const ContextShard& shard;
  const RingAttentionDims& dims;
  int N, r, L;

  Ring(const ContextShard& s, const RingAttentionDims& d)
      : shard(s), dims(d), N(s.size()), r(s.rank()), L(s.local_len()) {}
  // A rank's K and V, packed [K ‖ V], each [B, local_len(s), nk, d].
  size_t kv_floats(int s) const {
    return 2 * size_t(dims.B) * size_t(shard.local_len(s)) * size_t(dims.nk) * size_t(dims.d);
  }
  size_t max_kv_floats() const {
    size_t m = 0;
    for (int s = 0; s < N; ++s) m = std::max(m, kv_floats(s));
    return m;
  }
  // Local row offset of chunk c in the rows of the rank that holds it.
  int row_of(int c, int holder) const {
    return c == ContextShard::first_chunk(holder) ? 0 : shard.chunk_len(holder);
  }
  // Mask of query chunk qc against key chunk kc: 0 invisible, 1 full, 2 causal (diagonal).
  static int visibility(int qc, int kc) { return kc < qc ? 1 : kc == qc ? 2 : 0; }
  // The block of query chunk `which` (of this rank) against chunk kc held by rank s.
  AttentionBlock block(int which, int kc, int s) const {
    AttentionBlock b;
    b.batch = dims.B;
    b.q_len = shard.len(which);
    b.k_len = shard.chunk_len(kc);
    b.nq = dims.nq;
    b.nk = dims.nk;
    b.d = dims.d;
    b.q_batch_stride = size_t(L) * dims.nq * dims.d;
    b.kv_batch_stride = size_t(shard.local_len(s)) * dims.nk * dims.d;
    b.causal = visibility(shard.chunk(which), kc) == 2;
    b.scale = dims.scale;
    return b;
  }
  size_t q_off(int which) const { return size_t(shard.offset(which)) * dims.nq * dims.d; }
  size_t k_off(int c, int s) const { return size_t(row_of(c, s)) * dims.nk * dims.d; }
  // Offset of chunk `which`'s lse block in [B, nq, len(0)] ‖ [B, nq, len(1)].
  size_t lse_off(int which) const {
    return which == 0 ? 0 : size_t(dims.B) * dims.nq * size_t(shard.len(0));
  }
  int next() const { return (r + 1) % N; }
  int prev() const { return (r + N - 1) % N; }
};

void pack_kv(float* dst, const float* k, const float* v, size_t half) {
  std::memcpy(dst, k, sizeof(float) * half);
  std::memcpy(dst + half, v, sizeof(float) * half);
}

// (out, lse) ← the softmax-weighted merge of itself and one more block's (bout, blse).
void merge_block(float* out, float* lse, const float* bout, const float* blse, const Ring& ring,
                 int which) {
  const int B = ring.dims.B, nq = ring.dims.nq, d = ring.dims.d, len = ring.shard.len(which);
  const int off = ring.shard.offset(which);
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < len; ++t)
      for (int h = 0; h < nq; ++h) {
        const size_t li = (size_t(b) * nq + h) * len + t;
        const float a = lse[li], c = blse[li];
        const float m = std::max(a, c);
        const float wa = a == -INFINITY ? 0.0f : std::exp(a - m), wc = std::exp(c - m);
        const float inv = 1.0f / (wa + wc);
        const size_t row = (size_t(b) * ring.L + off + t) * nq * d + size_t(h) * d;
        for (int i = 0; i < d; ++i) out[row + i] = (wa * out[row + i] + wc * bout[row + i]) * inv;
        lse[li] = m + std::log(wa + wc);
      }
}

}  // namespace

void ring_attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                            const RingAttentionDims& dims, const ContextShard& shard, Arena& arena,
                            const Backend& be) {
  const Ring ring(shard, dims);
  const size_t q_floats = size_t(dims.B) * ring.L * dims.nq * dims.d;
  const size_t lse_floats = size_t(dims.B) * dims.nq * ring.L;
  std::fill_n(out, q_floats, 0.0f);
  std::fill_n(lse, lse_floats, -INFINITY);
  float* bout = arena.floats(q_floats);  // one block's output, at the rows of its query chunk
  float* blse = arena.floats(lse_floats);
  float* cur = arena.floats(ring.max_kv_floats());
  float* nxt = ring.N > 1 ? arena.floats(ring.max_kv_floats()) : nullptr;
  pack_kv(cur, k, v, ring.kv_floats(ring.r) / 2);
  for (int i = 0; i < ring.N; ++i) {
    const int s = (ring.r - i + ring.N) % ring.N;  // whose K and V this step holds
    std::unique_ptr<dist::Transfer> transfer;
    if (i + 1 < ring.N) {
      const int s_next = (s + ring.N - 1) % ring.N;
      transfer =
          shard.comm->start_sendrecv(cur, ring.kv_floats(s), ring.next(), nxt,
                                     ring.kv_floats(s_next), ring.prev(), DType::F32, kTagForward);
    }
    const float* Ks = cur;
    const float* Vs = cur + ring.kv_floats(s) / 2;
    for (int which = 0; which < 2; ++which)
      for (const int kc : {ContextShard::first_chunk(s), shard.second_chunk(s)}) {
        if (Ring::visibility(shard.chunk(which), kc) == 0) continue;
        const AttentionBlock blk = ring.block(which, kc, s);
        be.attention_block_forward(bout + ring.q_off(which), blse + ring.lse_off(which),
                                   q + ring.q_off(which), Ks + ring.k_off(kc, s),
                                   Vs + ring.k_off(kc, s), blk);
        merge_block(out, lse + ring.lse_off(which), bout, blse + ring.lse_off(which), ring, which);
      }
    if (transfer) {
      transfer->wait();
      std::swap(cur, nxt);
    }
  }
}

void ring_attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* out,
                             const float* lse, const float* q, const float* k, const float* v,
                             const RingAttentionDims& dims, const ContextShard& shard, Arena& arena,
                             const Backend& be) {
  const Ring ring(shard, dims);
  float* D = arena.floats(size_t(dims.B) * dims.nq * ring.L);
  for (int which = 0; which < 2; ++which) {
    AttentionBlock blk = ring.block(which, shard.chunk(which), ring.r);
    be.attention_row_dot(D + ring.lse_off(which), dout + ring.q_off(which), out + ring.q_off(which),
                         blk);
  }
  const size_t max_kv = ring.max_kv_floats();
  float* cur = arena.floats(max_kv);
  float* dcur = arena.zeros(max_kv);
  float* nxt = ring.N > 1 ? arena.floats(max_kv) : nullptr;
  float* dnxt = ring.N > 1 ? arena.floats(max_kv) : nullptr;
  pack_kv(cur, k, v, ring.kv_floats(ring.r) / 2);
  for (int i = 0; i < ring.N; ++i) {
    const int s = (ring.r - i + ring.N) % ring.N;
    const int s_next = (s + ring.N - 1) % ring.N;
    std::unique_ptr<dist::Transfer> transfer;
    if (i + 1 < ring.N)
      transfer =
          shard.comm->start_sendrecv(cur, ring.kv_floats(s), ring.next(), nxt,
                                     ring.kv_floats(s_next), ring.prev(), DType::F32, kTagKv);
    const size_t half = ring.kv_floats(s) / 2;
    for (int which = 0; which < 2; ++which)
      for (const int kc : {ContextShard::first_chunk(s), shard.second_chunk(s)}) {
        if (Ring::visibility(shard.chunk(which), kc) == 0) continue;
        const AttentionBlock blk = ring.block(which, kc, s);
        const size_t ko = ring.k_off(kc, s), qo = ring.q_off(which), lo = ring.lse_off(which);
        be.attention_block_backward(dq + qo, dcur + ko, dcur + half + ko, dout + qo, D + lo,
                                    lse + lo, q + qo, cur + ko, cur + half + ko, blk);
      }
    if (transfer) transfer->wait();
    if (ring.N > 1) {
      // Block s's dK ‖ dV, now holding this rank's share too, moves on; after the N-th hop each
      // rank holds its own block's, complete.
      dist::sendrecv(*shard.comm, dcur, ring.kv_floats(s), ring.next(), dnxt,
                     ring.kv_floats(s_next), ring.prev(), DType::F32, kTagGrad);
      std::swap(dcur, dnxt);
      std::swap(cur, nxt);
    }
  }
  const size_t half = ring.kv_floats(ring.r) / 2;
  for (size_t i = 0; i < half; ++i) dk[i] += dcur[i];
  for (size_t i = 0; i < half; ++i) dv[i] += dcur[half + i];
}

}  // namespace zaya
