#include "train/train_memory.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "core/error.h"
#include "model/parameter_placement.h"
#include "model/params.h"
#include "optim/muon_plan.h"
#include "optim/shard_layout.h"
#include "optim/zero1_sync.h"
#include "optim/zero2_reduce.h"

namespace zaya {

namespace {

// One arena allocation of n elements of 4 bytes (floats and int32 alike), rounded up to the
// arena's 64-byte alignment (core/arena.cpp).
int64_t block(int64_t n) {
  return (n * 4 + 63) / 64 * 64;
}

// Buffers a forward keeps, counted in fp32 and as bf16 activation storage keeps them
// (model/stored_activations.h: the bulk in bf16, the rest as they are).
struct Kept {
  int64_t fp32 = 0;    // as computed (fp32), and as fp32 storage keeps them
  int64_t stored = 0;  // as bf16 storage keeps them
  int64_t bulk = 0;    // the bulk's fp32 blocks: what the backward widens them into
  void add_bulk(int64_t n) { fp32 += block(n), stored += (n * 2 + 63) / 64 * 64, bulk += block(n); }
  void add_exact(int64_t n) { fp32 += block(n), stored += block(n); }  // fp32 floats or int32
  Kept operator+(const Kept& o) const { return {fp32 + o.fp32, stored + o.stored, bulk + o.bulk}; }
};

// A block's buffers (CCA or MoE, without the stage's norm): those its forward keeps for the
// backward whatever the recompute mode, those selective recompute drops and makes again (cheap),
// and those its backward takes. `scratch`: the cheap ones no activation holds (a forward's
// temporaries).
struct BlockBytes {
  Kept kept, cheap;
  int64_t scratch = 0, bwd = 0;
};

// CCA stage (model/cca.cpp), forward then backward: the buffers in the order they are taken.
BlockBytes cca_bytes(const ModelConfig& c, int64_t B, int64_t S) {
  const int64_t N = B * S, Dq = c.q_dim(), Dk = c.kv_dim(), C = Dq + Dk, P = C + Dk;
  const int64_t H = c.num_q_heads + c.num_kv_heads;
  BlockBytes b;
  b.kept.add_bulk(N * P);                   // proj
  b.kept.add_bulk(N * Dq);                  // att
  b.kept.add_exact(B * c.num_q_heads * S);  // lse
  // u, a (one padding row per sequence), qk1, v, head_temp, qkn (scratch), inv_norm, q, k.
  for (int64_t n : {N * C, B * (S + 1) * C, N * C, N * Dk}) b.cheap.add_bulk(n);
  b.cheap.add_exact(H);
  b.scratch = block(N * C);
  b.cheap.add_exact(N * H);
  b.cheap.add_bulk(N * Dq);
  b.cheap.add_bulk(N * Dk);
  // datt, dq, dk, dv, dqkn, dqk1, dhead_temp, da, du, dproj.
  b.bwd = block(N * Dq) + block(N * Dq) + block(N * Dk) + block(N * Dk) + block(N * C) +
          block(N * C) + block(H) + block(B * (S + 1) * C) + block(N * C) + block(N * P);
  return b;
}

// MoE stage (model/moe.cpp) with `routed` tokens sent to real experts.
BlockBytes moe_bytes(const ModelConfig& c, int64_t N, int64_t routed) {
  const int64_t E = c.hidden_size, R = c.router_dim, NR = c.num_routes(), F = c.expert_hidden;
  BlockBytes b;
  // state, m1_pre, m2_pre, logits, route, offsets, order (the router's, exact), the experts' h1
  // (2F wide) and y.
  for (int64_t n : {N * R, N * R, N * R, N * NR, N, NR + 1, N}) b.kept.add_exact(n);
  b.kept.add_bulk(routed * 2 * F);
  b.kept.add_bulk(routed * E);
  // rstd, hn, m1, m2, probs (the router's), the experts' gathered inputs xg and SwiGLU sw.
  for (int64_t n : {N, N * R, N * R, N * R, N * NR}) b.cheap.add_exact(n);
  b.cheap.add_bulk(routed * E);
  b.cheap.add_bulk(routed * F);
  // dprobs, dy, dsw, dh1, dxg, dlogits, dm2, dm2_pre, dm1, dm1_pre, dhn, dst.
  b.bwd = block(N * NR) + block(routed * E) + block(routed * F) + block(routed * 2 * F) +
          block(routed * E) + block(N * NR) + 6 * block(N * R);
  return b;
}

}  // namespace

int64_t activation_bytes(const ModelConfig& c, int64_t batch, int64_t seq,
                         std::span<const int64_t> routed, RecomputePlan recompute) {
  return activation_arenas(c, batch, seq, routed, recompute, false).total();
}

std::vector<int64_t> every_token_routed(const ModelConfig& c, int64_t tokens) {
  return std::vector<int64_t>(size_t(c.num_moe_stages()), tokens);
}

ActivationArenas activation_arenas(const ModelConfig& c, int64_t batch, int64_t seq,
                                   std::span<const int64_t> routed, RecomputePlan recompute,
                                   bool device_inputs, const LmHeadChunks& chunks,
                                   ActivationStorage storage) {
  const int64_t N = batch * seq, E = c.hidden_size, V = c.vocab_size, R = c.router_dim;
  const int64_t L = c.num_stages;
  ZAYA_CHECK(routed.empty() || int64_t(routed.size()) == c.num_moe_stages(),
             "activation_bytes: ", routed.size(), " routed counts for ", c.num_moe_stages(),
             " MoE stages");
  // Even spread over X experts + the skip route.
  const int64_t even = N * c.num_experts / c.num_routes();
  const int64_t embedding = block(N * E);
  // After the stages: final merge, norm, logits, log-sum-exp. Backward: dy, dr_final, dh, dr, then
  // the other pair of stage-to-stage gradients and the router-state gradients' two buffers.
  // (in blocks: one block of logits, the scratch, in the logits' place)
  const int64_t logits = chunks.enabled() ? int64_t(chunks.scratch_floats(int(N), int(V))) : N * V;
  const int64_t head = block(N * E) + block(N) + block(N * E) + block(logits) + block(N);
  const int64_t flow = 6 * block(N * E) + (c.num_moe_stages() >= 2 ? 2 * block(N * R) : 0);
  const bool bf16 = storage == ActivationStorage::kBf16;
  // every stage's forward buffers that stay until the backward (bf16 storage: and the two
  // stages' fp32 r and h the forward computes in)
  int64_t kept = bf16 ? std::min<int64_t>(L, 2) * 2 * block(N * E) : 0;
  int64_t stage = 0;      // the largest one stage's backward takes (freed when it is done)
  int64_t transient = 0;  // the largest of one stage's buffers in the second arena
  for (int64_t i = 0; i < L; ++i) {
    const bool moe = !ModelConfig::is_attention_stage(i);
    const BlockBytes b = moe ? moe_bytes(c, N, routed.empty() ? even : routed[size_t(i / 2)])
                             : cca_bytes(c, batch, seq);
    Kept norm;  // rstd, x
    norm.add_exact(N);
    norm.add_bulk(N * E);
    const int64_t back = block(N * E) + b.bwd;  // dx, the block's backward
    // bf16 storage: the whole stage's forward in fp32 in the second arena (model/zaya_model.h)
    const int64_t whole = norm.fp32 + b.kept.fp32 + b.cheap.fp32 + b.scratch;
    // r, h; bf16 storage: stored in bf16 once the next stage has read them (the last stage's
    // stay in their fp32 slot)
    kept += !bf16 ? 2 * block(N * E) : i + 1 < L ? 2 * ((N * E * 2 + 63) / 64 * 64) : 0;
    switch (recompute.for_stage(!moe)) {
      case Recompute::kNone: {
        const Kept all = norm + b.kept + b.cheap;
        kept += bf16 ? all.stored : all.fp32 + b.scratch;
        // + before the backward, the bulk widened again
        if (bf16) transient = std::max({transient, whole, all.bulk});
        stage = std::max(stage, back);
        break;
      }
      case Recompute::kSelective:
        kept += bf16 ? b.kept.stored : b.kept.fp32;
        transient = std::max(transient, norm.fp32 + b.cheap.fp32 + b.scratch);
        // + the kept bulk widened again before the cheap buffers are made again
        if (bf16)
          transient =
              std::max({transient, whole, b.kept.bulk + norm.fp32 + b.cheap.fp32 + b.scratch});
        stage = std::max(stage, back);
        break;
      case Recompute::kFull:
        kept += moe ? block(N) + block(N * R) : 0;  // routes, router state
        // + the recomputed stage's output and its whole forward
        stage = std::max(stage, block(N * E) + whole + back);
        break;
    }
  }
  // tokens, targets, RoPE's cos and sin rows
  const int64_t inputs = device_inputs ? 2 * block(N) + 2 * block(seq * (c.rotary_dim() / 2)) : 0;
  return {inputs + embedding + kept + head + flow + stage, transient};
}

TrainMemory train_memory(const ModelConfig& c, int64_t micro_batch, int64_t seq, int world,
                         int64_t runtime, int value_bytes) {
  ZAYA_CHECK(value_bytes == 4 || value_bytes == 2, "train_memory: values are 4 or 2 bytes");
  return train_memory(c, micro_batch, seq, world, runtime,
                      MemoryOptions{value_bytes, value_bytes, value_bytes});
}

TrainMemory train_memory(const ModelConfig& c, int64_t micro_batch, int64_t seq, int world,
                         int64_t runtime, MemoryOptions bytes) {
  ZAYA_CHECK(world >= 1, "train_memory: world size must be >= 1, got ", world);
  for (int b : {bytes.weights, bytes.gradients, bytes.activations})
    ZAYA_CHECK(b == 4 || b == 2, "train_memory: values are 4 or 2 bytes, got ", b);
  const ParamRegistry registry(c);
  const int64_t P = int64_t(registry.total_floats());
  ShardLayout layout{P, world, 0};
  TrainMemory m;
  m.weights = bytes.weights * P;
  if (bytes.weights == 2) {  // the tensors kept in fp32 beside their unused bf16 slots
    for (const ParamSpec& p : registry.specs())
      if (!weight_in_bf16(p)) m.weights += 4 * p.numel;
    // and the staging of the moves between the host and the storage (ParameterPlacement)
    m.weights += 4 * std::min<int64_t>(P, int64_t(ParameterPlacement::kStagingFloats));
  }
  ZAYA_CHECK(bytes.zero_stage == 1 || bytes.zero_stage == 2,
             "train_memory: ZeRO stage 1 or 2, got ", bytes.zero_stage);
  // Each tensor's gradient bytes: the Muon matrices' in bf16 with bf16 gradients (the
  // embedding's and the rest fp32).
  // With bf16 gradients, a bf16 buffer of the flat layout (the slots of the fp32 ones unused)
  // and an fp32 one of the others (ParameterPlacement).
  const auto grad_bytes = [&](const ParamSpec& p) {
    return (bytes.gradients == 2 ? (grad_in_bf16(p) ? 2 : 6) : 4) * p.numel;
  };
  // (At one rank there is nothing to shard: ZeRO-2 holds what ZeRO-1 does.)
  if (bytes.zero_stage == 1 || world == 1) {  // the flat buffer, its alignment padding included
    m.gradients = bytes.gradients * P;
    for (const ParamSpec& p : registry.specs())
      m.gradients += grad_bytes(p) - bytes.gradients * p.numel;
  } else {
    // ZeRO-2 (optim/zero2_reduce.h): the tensors outside the stages (the embedding's gradient is
    // written first in the backward, by the tied LM head, and is final last), the stage being
    // written and the one before it (moving to its owners meanwhile); memory goes back in whole
    // granules (2 MiB on a device, a page on the host), so each region's edges may keep one more
    // each, in each of the (with bf16 gradients, two) buffers. Never more than ZeRO-1's.
    std::vector<int64_t> per_stage(size_t(c.num_stages), 0);
    int64_t outside = 0, whole = 4 * P;
    for (const ParamSpec& p : registry.specs()) {
      whole += grad_bytes(p) - 4 * p.numel;
      if (p.stage >= 0)
        per_stage[size_t(p.stage)] += grad_bytes(p);
      else
        outside += grad_bytes(p);
    }
    int64_t two = per_stage[0];
    for (size_t i = 1; i < per_stage.size(); ++i)
      two = std::max(two, per_stage[i - 1] + per_stage[i]);
    const int64_t granule = bytes.device ? int64_t(2) << 20 : 4096;
    const int64_t edges = (bytes.gradients == 2 ? 2 : 1) * 4 * granule;
    m.gradients = std::min(whole, outside + two + edges);
  }
  // exp_avg, exp_avg_sq and the update direction, each the size of the rank's range (+ the fp32
  // master weights with bf16 weights).
  m.optimizer = (bytes.weights == 4 ? 3 : 4) * 4 * layout.chunk();
  // The busiest rank's whole matrices, and one Newton–Schulz workspace (two copies of the largest
  // matrix and two Gram-sized squares; backend/cpu/newton_schulz.cpp).
  // The owners are the same on every rank (the plan is a function of the layout alone), so one
  // plan gives every rank's share.
  int64_t owned = 0, largest = 0, gram = 0;
  {
    const MuonPlan plan = plan_muon(registry.specs(), layout);
    std::vector<int64_t> per_rank(size_t(world), 0);
    for (const MuonPlan::Matrix& mat : plan.matrices)
      per_rank[size_t(mat.owner)] += registry.specs()[mat.spec].numel;
    owned = *std::max_element(per_rank.begin(), per_rank.end());
  }
  for (const ParamSpec& p : registry.specs())
    if (p.group == OptimGroup::Muon) {
      largest = std::max(largest, p.numel);
      gram = std::max(gram, std::min(p.shape[0], p.shape[1]));
    }
  m.muon = 4 * (owned + 2 * largest + 2 * gram * gram);
  if (world > 1) {
    // The range's reduced gradients, and for each bucket in flight Zero1Sync's staging
    // (bucket × world) and piece buffers, plus on the host the MPI communicator's receive buffer
    // (bucket × world; a device's collectives move its buffers in place)
    // (optim/zero1_sync.h: the staging stays at 2^21 floats whatever the world size).
    const int64_t bucket =
        Zero1Sync::bucket_for(Zero1Sync::kDefaultStagingFloats, world, layout.chunk());
    const int64_t received = bytes.device ? 0 : bucket * world;
    m.zero1 = 4 * (layout.chunk() + Zero1Sync::kInFlight * (bucket * world + received + bucket));
    if (bytes.zero_stage == 2) {
      // ZeRO-2: Zero1Sync for the weights' all-gather alone (one slot), and per bucket in
      // flight of ZeRO-2's reduce a received sum, a bucket to send from with bf16 gradients, and
      // on the host what the owner's communicator receives.
      const int64_t send = bytes.gradients == 2 ? bucket : 0;
      m.zero1 = 4 * (layout.chunk() + bucket * world + received + bucket +
                     Zero2Reduce::kInFlight * (bucket + send + received));
    }
  } else if (bytes.gradients == 2) {
    m.zero1 = 4 * P;  // one rank: the bf16 gradients widened to fp32 for the optimizer
  }
  m.activations = planned_activations(c, micro_batch, seq, bytes);
  const int64_t snapshot = 3 * 4 * layout.chunk();  // weights, exp_avg, exp_avg_sq of the range
  if (bytes.device) {
    // ParameterPlacement's host ParamStore: its weights (its gradients' pages are given back
    // while the device holds its own, ParameterPlacement::set_resident).
    m.host_params = 4 * P;
    // The snapshot's m and v are copied out of the device for it (Optimizer::state_tensors),
    // through two pinned 16 MiB chunks (backend/cuda/device.cu).
    m.host_snapshot = snapshot + (int64_t(32) << 20);
  } else {
    m.checkpoint = snapshot;
  }
  m.runtime = runtime;
  return m;
}

int64_t planned_activations(const ModelConfig& c, int64_t micro_batch, int64_t seq,
                            const MemoryOptions& o) {
  // On a device, the most a step can take (every token to an expert): the arenas are reserved
  // at that size before step 1 (RunPlan::activations), so a step never outgrows them.
  const std::vector<int64_t> routed =
      o.device ? every_token_routed(c, micro_batch * seq) : std::vector<int64_t>();
  const ActivationStorage storage =
      o.activations == 2 ? ActivationStorage::kBf16 : ActivationStorage::kFp32;
  return activation_arenas(c, micro_batch, seq, routed, o.recompute, o.device, o.lm_head_chunks,
                           storage)
      .total();
}

std::string format_bytes(double bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) bytes /= 1024, ++u;
  char b[32];
  std::snprintf(b, sizeof b, u == 0 ? "%.0f %s" : "%.2f %s", bytes, units[u]);
  return b;
}

}  // namespace zaya
