#include "model/cca.h"

#include <cmath>
#include <cstring>

#include "backend/cpu/attention.h"
#include "backend/cpu/conv.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/norm.h"
#include "backend/cpu/rope.h"
#include "model/cca_halo.h"
#include "model/ring_attention.h"

namespace zaya {

using Dims = CcaDims;

namespace {

// Under context parallelism the convolutions run over each local chunk with its 2 halo rows in
// front (model/cca_halo.h): outputs at the halo rows are dropped, and every kept output reads
// only real rows, so each equals the whole sequence's.
void chunk_convs_forward(CcaActivations& act, const CcaWeights& w, const Dims& D, int B, int L,
                         const ContextShard& shard, Arena& arena) {
  for (float*& h : act.halo) h = arena.floats(size_t(B) * kHaloRows * D.P);
  cca_halo_forward(act.halo, act.proj, B, D.P, shard);
  act.qk1 = arena.floats(size_t(B) * L * D.C);
  for (int which = 0; which < 2; ++which) {
    const int len = shard.len(which), off = shard.offset(which), ext = len + kHaloRows;
    float* u = act.u_ext[which] = arena.floats(size_t(B) * ext * D.C);
    for (int b = 0; b < B; ++b)
      for (int j = 0; j < ext; ++j) {
        const float* src = j < kHaloRows ? act.halo[which] + (size_t(b) * kHaloRows + j) * D.P
                                         : act.proj + (size_t(b) * L + off + j - kHaloRows) * D.P;
        std::memcpy(u + (size_t(b) * ext + j) * D.C, src, sizeof(float) * D.C);
      }
    float* a = act.a_ext[which] = arena.floats(size_t(B) * (ext + 1) * D.C);
    cpu::depthwise_conv_forward(a, u, w.conv0_w, w.conv0_b, B, ext, D.C);
    float* z = arena.floats(size_t(B) * ext * D.C);
    cpu::grouped_conv_forward(z, a, w.conv1_w, w.conv1_b, B, ext, D.C, D.d);
    for (int b = 0; b < B; ++b)
      std::memcpy(act.qk1 + (size_t(b) * L + off) * D.C, z + (size_t(b) * ext + kHaloRows) * D.C,
                  sizeof(float) * len * D.C);
  }
}

// The backward of chunk_convs_forward: du for the local rows, and the q0 ‖ k0 part of the halo
// rows' gradient into dhalo (sent back to their owner by cca_halo_backward).
void chunk_convs_backward(float* du, float* const dhalo[2], CcaGrads& g, const float* dqk1,
                          const CcaActivations& act, const CcaWeights& w, const Dims& D, int B,
                          int L, const ContextShard& shard, Arena& arena) {
  for (int which = 0; which < 2; ++which) {
    const int len = shard.len(which), off = shard.offset(which), ext = len + kHaloRows;
    float* dz = arena.zeros(size_t(B) * ext * D.C);
    for (int b = 0; b < B; ++b)
      std::memcpy(dz + (size_t(b) * ext + kHaloRows) * D.C, dqk1 + (size_t(b) * L + off) * D.C,
                  sizeof(float) * len * D.C);
    float* da = arena.zeros(size_t(B) * (ext + 1) * D.C);
    cpu::grouped_conv_backward(da, g.conv1_w, g.conv1_b, dz, act.a_ext[which], w.conv1_w, B, ext,
                               D.C, D.d);
    float* du_ext = arena.zeros(size_t(B) * ext * D.C);
    cpu::depthwise_conv_backward(du_ext, g.conv0_w, g.conv0_b, da, act.u_ext[which], w.conv0_w, B,
                                 ext, D.C);
    for (int b = 0; b < B; ++b) {
      std::memcpy(du + (size_t(b) * L + off) * D.C, du_ext + (size_t(b) * ext + kHaloRows) * D.C,
                  sizeof(float) * len * D.C);
      for (int j = 0; j < kHaloRows; ++j)
        std::memcpy(dhalo[which] + (size_t(b) * kHaloRows + j) * D.P,
                    du_ext + (size_t(b) * ext + j) * D.C, sizeof(float) * D.C);
    }
  }
}

// Which local chunk row j (0..L-1) of a sequence is in, under context parallelism.
int chunk_of(const ContextShard& shard, int j) {
  return j < shard.len(0) ? 0 : 1;
}

}  // namespace

void cca_forward(float* out, CcaActivations& act, const float* x, const CcaWeights& w,
                 const RopeTables& rope, const ModelConfig& c, int B, int S, Arena& arena,
                 const ContextShard* shard) {
  const Dims D(c);
  const int N = B * S, H = D.nq + D.nk;
  act.x = x;

  // 1. Down-projections, fused: [q0 ‖ k0 ‖ v_cur ‖ v_prev_raw] = x · [Wq; Wk; Wv1; Wv2]ᵀ.
  act.proj = arena.floats(size_t(N) * D.P);
  cpu::matmul_forward(act.proj, x, w.qkvv, nullptr, N, D.E, D.P);

  // 2. The two causal convolutions over the packed q0 ‖ k0 (left padding of 2 inside the ops).
  if (shard) {
    chunk_convs_forward(act, w, D, B, S, *shard, arena);
  } else {
    act.u = arena.floats(size_t(N) * D.C);
#pragma omp parallel for schedule(static)
    for (int t = 0; t < N; ++t)
      std::memcpy(act.u + size_t(t) * D.C, act.proj + size_t(t) * D.P, sizeof(float) * D.C);
    act.a = arena.floats(size_t(B) * (S + 1) * D.C);
    cpu::depthwise_conv_forward(act.a, act.u, w.conv0_w, w.conv0_b, B, S, D.C);
    act.qk1 = arena.floats(size_t(N) * D.C);
    cpu::grouped_conv_forward(act.qk1, act.a, w.conv1_w, w.conv1_b, B, S, D.C, D.d);
  }

  // 3. q-k-mean skip from the pre-conv projections:
  //    q1[h] += (q0[h] + k0[j(h)]) / 2;   k1[j] += mean_{h in j}(q0[h]) / 2 + k0[j] / 2.
  // 4. Value shift: v = [v_cur(t) ‖ v_prev_raw(t-1)], zero at the first position of a sequence.
  act.v = arena.floats(size_t(N) * D.Dk);
#pragma omp parallel for schedule(static)
  for (int t = 0; t < N; ++t) {
    const float* q0 = act.proj + size_t(t) * D.P;
    const float* k0 = q0 + D.Dq;
    float* q1 = act.qk1 + size_t(t) * D.C;
    float* k1 = q1 + D.Dq;
    for (int h = 0; h < D.nq; ++h) {
      const float* kj = k0 + (h / D.g) * D.d;
      for (int i = 0; i < D.d; ++i) q1[h * D.d + i] += 0.5f * (q0[h * D.d + i] + kj[i]);
    }
    for (int j = 0; j < D.nk; ++j)
      for (int i = 0; i < D.d; ++i) {
        float mean = 0.0f;
        for (int h = j * D.g; h < (j + 1) * D.g; ++h) mean += q0[h * D.d + i];
        mean /= float(D.g);
        k1[j * D.d + i] += 0.5f * mean + 0.5f * k0[j * D.d + i];
      }
    const int half = D.Dk / 2;
    float* v = act.v + size_t(t) * D.Dk;
    std::memcpy(v, k0 + D.Dk, sizeof(float) * half);
    const int j = t % S;
    const int which = shard ? chunk_of(*shard, j) : 0;
    if (shard && j == shard->offset(which)) {  // a chunk's first row: the halo's last row
      const float* halo_row = act.halo[which] + (size_t(t / S) * kHaloRows + 1) * D.P;
      std::memcpy(v + half, halo_row + D.C + half, sizeof(float) * half);
    } else if (j == 0) {
      std::memset(v + half, 0, sizeof(float) * half);
    } else {
      std::memcpy(v + half, act.proj + size_t(t - 1) * D.P + D.C + half, sizeof(float) * half);
    }
  }

  // 5. L2 normalisation × sqrt(d) of every query and key head; keys also × raw temp.
  act.head_temp = arena.floats(H);
  for (int h = 0; h < H; ++h) act.head_temp[h] = h < D.nq ? 1.0f : w.temp[h - D.nq];
  float* qkn = arena.floats(size_t(N) * D.C);
  act.inv_norm = arena.floats(size_t(N) * H);
  cpu::l2norm_forward(qkn, act.inv_norm, act.qk1, act.head_temp, N, H, D.d);

  // 6. Partial RoPE on the first rot dims of every head (queries and keys alike).
  cpu::rope_apply(qkn, rope.cos, rope.sin, B, S, H, D.d, D.rot, false);
  act.q = arena.floats(size_t(N) * D.Dq);
  act.k = arena.floats(size_t(N) * D.Dk);
#pragma omp parallel for schedule(static)
  for (int t = 0; t < N; ++t) {
    std::memcpy(act.q + size_t(t) * D.Dq, qkn + size_t(t) * D.C, sizeof(float) * D.Dq);
    std::memcpy(act.k + size_t(t) * D.Dk, qkn + size_t(t) * D.C + D.Dq, sizeof(float) * D.Dk);
  }

  // 7. Causal GQA attention in the latent space, scale 1/sqrt(d).
  act.att = arena.floats(size_t(N) * D.Dq);
  act.lse = arena.floats(size_t(B) * D.nq * S);
  const float scale = float(1.0 / std::sqrt(double(D.d)));
  if (shard)
    ring_attention_forward(act.att, act.lse, act.q, act.k, act.v, {B, D.nq, D.nk, D.d, scale},
                           *shard, arena);
  else
    cpu::attention_forward(act.att, act.lse, act.q, act.k, act.v, B, S, D.nq, D.nk, D.d, scale);

  // 8. Output projection back to the hidden size.
  cpu::matmul_forward(out, act.att, w.o_proj, nullptr, N, D.Dq, D.E);
}

void cca_backward(float* dx, CcaGrads& g, const float* dout, const CcaActivations& act,
                  const CcaWeights& w, const RopeTables& rope, const ModelConfig& c, int B, int S,
                  Arena& arena, const ContextShard* shard) {
  const Dims D(c);
  const int N = B * S, H = D.nq + D.nk;

  // 8. o_proj.
  float* datt = arena.zeros(size_t(N) * D.Dq);
  cpu::matmul_backward(datt, g.o_proj, nullptr, dout, act.att, w.o_proj, N, D.Dq, D.E);

  // 7. Attention.
  float* dq = arena.zeros(size_t(N) * D.Dq);
  float* dk = arena.zeros(size_t(N) * D.Dk);
  float* dv = arena.zeros(size_t(N) * D.Dk);
  const float scale = float(1.0 / std::sqrt(double(D.d)));
  if (shard)
    ring_attention_backward(dq, dk, dv, datt, act.att, act.lse, act.q, act.k, act.v,
                            {B, D.nq, D.nk, D.d, scale}, *shard, arena);
  else
    cpu::attention_backward(dq, dk, dv, datt, act.att, act.lse, act.q, act.k, act.v, B, S, D.nq,
                            D.nk, D.d, scale);

  // 6. RoPE is a rotation: its backward rotates the gradient back.
  float* dqkn = arena.floats(size_t(N) * D.C);
#pragma omp parallel for schedule(static)
  for (int t = 0; t < N; ++t) {
    std::memcpy(dqkn + size_t(t) * D.C, dq + size_t(t) * D.Dq, sizeof(float) * D.Dq);
    std::memcpy(dqkn + size_t(t) * D.C + D.Dq, dk + size_t(t) * D.Dk, sizeof(float) * D.Dk);
  }
  cpu::rope_apply(dqkn, rope.cos, rope.sin, B, S, H, D.d, D.rot, true);

  // 5. L2 norm (+ temperature gradient, kept only for the key heads).
  float* dqk1 = arena.zeros(size_t(N) * D.C);
  float* dhead_temp = arena.zeros(H);
  cpu::l2norm_backward(dqk1, dhead_temp, dqkn, act.qk1, act.head_temp, act.inv_norm, N, H, D.d);
  for (int j = 0; j < D.nk; ++j) g.temp[j] += dhead_temp[D.nq + j];

  // 2. The convolutions, backwards: dqk1 is also dz (the q-k-mean adds to z).
  float* du = arena.zeros(size_t(N) * D.C);
  float* dhalo[2] = {nullptr, nullptr};
  if (shard) {
    for (float*& h : dhalo) h = arena.zeros(size_t(B) * kHaloRows * D.P);
    chunk_convs_backward(du, dhalo, g, dqk1, act, w, D, B, S, *shard, arena);
  } else {
    float* da = arena.zeros(size_t(B) * (S + 1) * D.C);
    cpu::grouped_conv_backward(da, g.conv1_w, g.conv1_b, dqk1, act.a, w.conv1_w, B, S, D.C, D.d);
    cpu::depthwise_conv_backward(du, g.conv0_w, g.conv0_b, da, act.u, w.conv0_w, B, S, D.C);
  }

  // 3 + 4. Assemble the gradient of the fused projection: conv path + q-k-mean path for q0/k0,
  // and the value gradients (the previous-token half shifts one step back in time).
  float* dproj = arena.floats(size_t(N) * D.P);
  const int half = D.Dk / 2;
  const float inv_g = 1.0f / float(D.g);
#pragma omp parallel for schedule(static)
  for (int t = 0; t < N; ++t) {
    float* dq0 = dproj + size_t(t) * D.P;
    float* dk0 = dq0 + D.Dq;
    const float* dq1 = dqk1 + size_t(t) * D.C;
    const float* dk1 = dq1 + D.Dq;
    const float* dut = du + size_t(t) * D.C;
    for (int h = 0; h < D.nq; ++h) {
      const float* dkj = dk1 + (h / D.g) * D.d;
      for (int i = 0; i < D.d; ++i)
        dq0[h * D.d + i] = dut[h * D.d + i] + 0.5f * dq1[h * D.d + i] + 0.5f * inv_g * dkj[i];
    }
    for (int j = 0; j < D.nk; ++j)
      for (int i = 0; i < D.d; ++i) {
        float s = 0.0f;
        for (int h = j * D.g; h < (j + 1) * D.g; ++h) s += dq1[h * D.d + i];
        dk0[j * D.d + i] = dut[D.Dq + j * D.d + i] + 0.5f * s + 0.5f * dk1[j * D.d + i];
      }
    float* dvc = dk0 + D.Dk;
    float* dvp = dvc + half;
    std::memcpy(dvc, dv + size_t(t) * D.Dk, sizeof(float) * half);
    const int j = t % S;
    // The last row's value is read by nobody here: by nobody at the end of a sequence, by the
    // next chunk's first row (through the halo) at the end of a chunk.
    const bool last = j + 1 == S || (shard && j + 1 == shard->len(0));
    if (last) {
      std::memset(dvp, 0, sizeof(float) * half);
    } else {
      std::memcpy(dvp, dv + size_t(t + 1) * D.Dk + half, sizeof(float) * half);
    }
  }

  if (shard) {
    // The value shift of each chunk's first row read the halo's last row: its gradient.
    for (int which = 0; which < 2; ++which)
      for (int b = 0; b < B; ++b)
        std::memcpy(dhalo[which] + (size_t(b) * kHaloRows + 1) * D.P + D.C + half,
                    dv + (size_t(b) * S + shard->offset(which)) * D.Dk + half,
                    sizeof(float) * half);
    cca_halo_backward(dproj, dhalo, B, D.P, *shard);
  }

  // 1. The fused down-projection.
  cpu::matmul_backward(dx, g.qkvv, nullptr, dproj, act.x, w.qkvv, N, D.E, D.P);
}

}  // namespace zaya
