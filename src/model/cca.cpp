#include "model/cca.h"

#include <cmath>
#include <cstring>

#include "model/cca_halo.h"
#include "model/ring_attention.h"

namespace zaya {

using Dims = CcaDims;

namespace {

// Under context parallelism the convolutions run over each local chunk with its 2 halo rows in
// front (model/cca_halo.h): outputs at the halo rows are dropped, and every kept output reads
// only real rows, so each equals the whole sequence's. act.halo holds the rows already.
void chunk_convs_forward(CcaActivations& act, const CcaWeights& w, const Dims& D, int B, int L,
                         const ContextShard& shard, Arena& arena, const Backend& be) {
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
    be.depthwise_conv_forward(a, u, w.conv0_w, w.conv0_b, B, ext, D.C);
    float* z = arena.floats(size_t(B) * ext * D.C);
    be.grouped_conv_forward(z, a, w.conv1_w, w.conv1_b, B, ext, D.C, D.d);
    for (int b = 0; b < B; ++b)
      std::memcpy(act.qk1 + (size_t(b) * L + off) * D.C, z + (size_t(b) * ext + kHaloRows) * D.C,
                  sizeof(float) * len * D.C);
  }
}

// Steps 2–6 of the forward (below), from act.proj (and act.halo) to act.q, act.k and act.v: the
// convolutions, the q-k-mean, the value shift, the L2 norm and RoPE. Everything between the two
// products, so it is what selective recompute drops and cca_rebuild runs again.
void between_products_forward(CcaActivations& act, const CcaWeights& w, const RopeTables& rope,
                              const Dims& D, int B, int S, Arena& arena, const ContextShard* shard,
                              const Backend& be) {
  const int N = B * S, H = D.nq + D.nk;
  // 2. The two causal convolutions over the packed q0 ‖ k0 (left padding of 2 inside the ops).
  if (shard) {
    chunk_convs_forward(act, w, D, B, S, *shard, arena, be);
  } else {
    act.u = arena.floats(size_t(N) * D.C);
    be.copy_rows(act.u, D.C, act.proj, D.P, N, D.C);
    act.a = arena.floats(size_t(B) * (S + 1) * D.C);
    be.depthwise_conv_forward(act.a, act.u, w.conv0_w, w.conv0_b, B, S, D.C);
    act.qk1 = arena.floats(size_t(N) * D.C);
    be.grouped_conv_forward(act.qk1, act.a, w.conv1_w, w.conv1_b, B, S, D.C, D.d);
  }

  // 3. q-k-mean skip from the pre-conv projections:
  //    q1[h] += (q0[h] + k0[j(h)]) / 2;   k1[j] += mean_{h in j}(q0[h]) / 2 + k0[j] / 2.
  // 4. Value shift: v = [v_cur(t) ‖ v_prev_raw(t-1)], zero at the first position of a sequence.
  act.v = arena.floats(size_t(N) * D.Dk);
  be.cca_mix_forward(act.qk1, act.v, act.proj, N, S, D.nq, D.nk, D.d);
  if (shard) {
    // A local chunk's first row takes its previous value half from the halo's last row (the
    // halo of the sequence's first chunk is zero, as its padding).
    const int half = D.Dk / 2;
    for (int which = 0; which < 2; ++which)
      for (int b = 0; b < B; ++b)
        std::memcpy(act.v + (size_t(b) * S + shard->offset(which)) * D.Dk + half,
                    act.halo[which] + (size_t(b) * kHaloRows + 1) * D.P + D.C + half,
                    sizeof(float) * half);
  }

  // 5. L2 normalisation × sqrt(d) of every query and key head; keys also × raw temp.
  act.head_temp = arena.floats(H);
  be.fill(act.head_temp, size_t(D.nq), 1.0f);
  be.copy(act.head_temp + D.nq, w.temp, sizeof(float) * size_t(D.nk));
  float* qkn = arena.floats(size_t(N) * D.C);
  act.inv_norm = arena.floats(size_t(N) * H);
  be.l2norm_forward(qkn, act.inv_norm, act.qk1, act.head_temp, N, H, D.d);

  // 6. Partial RoPE on the first rot dims of every head (queries and keys alike).
  be.rope_apply(qkn, rope.cos, rope.sin, B, S, H, D.d, D.rot, false);
  act.q = arena.floats(size_t(N) * D.Dq);
  act.k = arena.floats(size_t(N) * D.Dk);
  be.copy_rows(act.q, D.Dq, qkn, D.C, N, D.Dq);
  be.copy_rows(act.k, D.Dk, qkn + D.Dq, D.C, N, D.Dk);
}

// Forgets the buffers between_products_forward took (selective recompute freed them).
void forget_between_products(CcaActivations& act) {
  act.u = act.a = act.qk1 = act.inv_norm = act.head_temp = act.q = act.k = act.v = nullptr;
  for (int which = 0; which < 2; ++which) act.u_ext[which] = act.a_ext[which] = nullptr;
}

// The backward of chunk_convs_forward: du for the local rows, and the q0 ‖ k0 part of the halo
// rows' gradient into dhalo (sent back to their owner by cca_halo_backward).
void chunk_convs_backward(float* du, float* const dhalo[2], CcaGrads& g, const float* dqk1,
                          const CcaActivations& act, const CcaWeights& w, const Dims& D, int B,
                          int L, const ContextShard& shard, Arena& arena, const Backend& be) {
  for (int which = 0; which < 2; ++which) {
    const int len = shard.len(which), off = shard.offset(which), ext = len + kHaloRows;
    float* dz = arena.zeros(size_t(B) * ext * D.C);
    for (int b = 0; b < B; ++b)
      std::memcpy(dz + (size_t(b) * ext + kHaloRows) * D.C, dqk1 + (size_t(b) * L + off) * D.C,
                  sizeof(float) * len * D.C);
    float* da = arena.zeros(size_t(B) * (ext + 1) * D.C);
    be.grouped_conv_backward(da, g.conv1_w, g.conv1_b, dz, act.a_ext[which], w.conv1_w, B, ext, D.C,
                             D.d);
    float* du_ext = arena.zeros(size_t(B) * ext * D.C);
    be.depthwise_conv_backward(du_ext, g.conv0_w, g.conv0_b, da, act.u_ext[which], w.conv0_w, B,
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
}  // namespace

void cca_forward(float* out, CcaActivations& act, const float* x, const CcaWeights& w,
                 const RopeTables& rope, const ModelConfig& c, int B, int S, Arena& arena,
                 const ContextShard* shard, const Backend& be, Arena* transient) {
  const Dims D(c);
  const int N = B * S;
  act.x = x;

  // 1. Down-projections, fused: [q0 ‖ k0 ‖ v_cur ‖ v_prev_raw] = x · [Wq; Wk; Wv1; Wv2]ᵀ.
  act.proj = arena.floats(size_t(N) * D.P);
  be.matmul_forward(act.proj, x, w.qkvv, nullptr, N, D.E, D.P);
  if (shard) {  // the rows before each local chunk, from the ranks that hold them
    for (float*& h : act.halo) h = arena.floats(size_t(B) * kHaloRows * D.P);
    cca_halo_forward(act.halo, act.proj, B, D.P, *shard);
  }

  // 2–6.
  between_products_forward(act, w, rope, D, B, S, transient ? *transient : arena, shard, be);

  // 7. Causal GQA attention in the latent space, scale 1/sqrt(d).
  act.att = arena.floats(size_t(N) * D.Dq);
  act.lse = arena.floats(size_t(B) * D.nq * S);
  const float scale = float(1.0 / std::sqrt(double(D.d)));
  if (shard)
    ring_attention_forward(act.att, act.lse, act.q, act.k, act.v, {B, D.nq, D.nk, D.d, scale},
                           *shard, arena, be);
  else
    be.attention_forward(act.att, act.lse, act.q, act.k, act.v, B, S, D.nq, D.nk, D.d, scale);

  // 8. Output projection back to the hidden size.
  be.matmul_forward(out, act.att, w.o_proj, nullptr, N, D.Dq, D.E);
  if (transient) forget_between_products(act);
}

void cca_rebuild(CcaActivations& act, const CcaWeights& w, const RopeTables& rope,
                 const ModelConfig& c, int B, int S, Arena& arena, const ContextShard* shard,
                 const Backend& be) {
  between_products_forward(act, w, rope, Dims(c), B, S, arena, shard, be);
}

void visit_saved(CcaActivations& act, const ModelConfig& c, int B, int S, SavedBuffers& visit) {
  const Dims D(c);
  const size_t N = size_t(B) * S;
  const auto bulk = SavedKind::kBulk;
  visit.floats(act.proj, N * D.P, bulk);
  visit.floats(act.u, N * D.C, bulk);
  visit.floats(act.a, size_t(B) * (S + 1) * D.C, bulk);
  visit.floats(act.qk1, N * D.C, bulk);
  visit.floats(act.v, N * D.Dk, bulk);
  visit.floats(act.head_temp, size_t(D.H), SavedKind::kFp32);
  visit.floats(act.inv_norm, N * D.H, SavedKind::kFp32);
  visit.floats(act.q, N * D.Dq, bulk);
  visit.floats(act.k, N * D.Dk, bulk);
  visit.floats(act.att, N * D.Dq, bulk);
  visit.floats(act.lse, size_t(B) * D.nq * S, SavedKind::kFp32);  // attention's backward: exact
}

void cca_backward(float* dx, CcaGrads& g, const float* dout, const CcaActivations& act,
                  const CcaWeights& w, const RopeTables& rope, const ModelConfig& c, int B, int S,
                  Arena& arena, const ContextShard* shard, const Backend& be) {
  const Dims D(c);
  const int N = B * S, H = D.nq + D.nk;

  // 8. o_proj.
  float* datt = arena.zeros(size_t(N) * D.Dq);
  be.matmul_backward(datt, g.o_proj, nullptr, dout, act.att, w.o_proj, N, D.Dq, D.E);

  // 7. Attention.
  float* dq = arena.zeros(size_t(N) * D.Dq);
  float* dk = arena.zeros(size_t(N) * D.Dk);
  float* dv = arena.zeros(size_t(N) * D.Dk);
  const float scale = float(1.0 / std::sqrt(double(D.d)));
  if (shard)
    ring_attention_backward(dq, dk, dv, datt, act.att, act.lse, act.q, act.k, act.v,
                            {B, D.nq, D.nk, D.d, scale}, *shard, arena, be);
  else
    be.attention_backward(dq, dk, dv, datt, act.att, act.lse, act.q, act.k, act.v, B, S, D.nq, D.nk,
                          D.d, scale);

  // 6. RoPE is a rotation: its backward rotates the gradient back.
  float* dqkn = arena.floats(size_t(N) * D.C);
  be.copy_rows(dqkn, D.C, dq, D.Dq, N, D.Dq);
  be.copy_rows(dqkn + D.Dq, D.C, dk, D.Dk, N, D.Dk);
  be.rope_apply(dqkn, rope.cos, rope.sin, B, S, H, D.d, D.rot, true);

  // 5. L2 norm (+ temperature gradient, kept only for the key heads).
  float* dqk1 = arena.zeros(size_t(N) * D.C);
  float* dhead_temp = arena.zeros(H);
  be.l2norm_backward(dqk1, dhead_temp, dqkn, act.qk1, act.head_temp, act.inv_norm, N, H, D.d);
  be.add_into(g.temp, dhead_temp + D.nq, size_t(D.nk));

  // 2. The convolutions, backwards: dqk1 is also dz (the q-k-mean adds to z).
  float* du = arena.zeros(size_t(N) * D.C);
  float* dhalo[2] = {nullptr, nullptr};
  if (shard) {
    for (float*& h : dhalo) h = arena.zeros(size_t(B) * kHaloRows * D.P);
    chunk_convs_backward(du, dhalo, g, dqk1, act, w, D, B, S, *shard, arena, be);
  } else {
    float* da = arena.zeros(size_t(B) * (S + 1) * D.C);
    be.grouped_conv_backward(da, g.conv1_w, g.conv1_b, dqk1, act.a, w.conv1_w, B, S, D.C, D.d);
    be.depthwise_conv_backward(du, g.conv0_w, g.conv0_b, da, act.u, w.conv0_w, B, S, D.C);
  }

  // 3 + 4. Assemble the gradient of the fused projection: conv path + q-k-mean path for q0/k0,
  // and the value gradients (the previous-token half shifts one step back in time).
  float* dproj = arena.floats(size_t(N) * D.P);
  be.cca_mix_backward(dproj, dqk1, du, dv, N, S, D.nq, D.nk, D.d);
  const int half = D.Dk / 2;
  if (shard) {
    // The first local chunk's last row is read by the next chunk's first row, on another rank
    // (through the halo): nobody here.
    for (int b = 0; b < B; ++b)
      std::memset(dproj + (size_t(b) * S + shard->len(0) - 1) * D.P + D.C + half, 0,
                  sizeof(float) * half);
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
  be.matmul_backward(dx, g.qkvv, nullptr, dproj, act.x, w.qkvv, N, D.E, D.P);
}

}  // namespace zaya
