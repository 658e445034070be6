// ZayaModel's L stages, forward and backward, under each recompute mode (model/recompute.h):
// what a stage's forward keeps, and what the backward makes again before each stage's backward.
#include <algorithm>
#include <string>

#include "core/error.h"
#include "core/trace.h"
#include "model/zaya_model.h"

namespace zaya {

// The L stages; with recompute each keeps only what its backward does not make again.
void ZayaModel::stages_forward(const RopeTables& rope) {
  const int N = B_ * T_, E = int(config_.hidden_size), L = int(config_.num_stages);
  const ContextShard* shard = sharded_ ? &shard_ : nullptr;
  acts_.assign(L, StageActivations{});
  // bf16 storage: two stages' residual streams in fp32 (the stage being computed and the one
  // its merge reads); each earlier one is stored in bf16 (model/stored_activations.h).
  if (storing_bf16_)
    for (int k = 0; k < std::min(L, 2); ++k)
      stream_slots_[k] = {arena_.floats(size_t(N) * E), arena_.floats(size_t(N) * E)};
  const float* h_prev = emb_;
  const float* r_prev = nullptr;
  for (int i = 0; i < L; ++i) {
    const trace::Span span("model", [&] { return "stage " + std::to_string(i) + " forward"; });
    StageActivations& a = acts_[i];
    if (storing_bf16_) {
      a.r = stream_slots_[i % 2].r;
      a.h = stream_slots_[i % 2].h;
    } else {
      a.r = arena_.floats(size_t(N) * E);  // merged in stage_forward, with the norm
      a.h = arena_.floats(size_t(N) * E);
    }
    const MergeInputs merge{h_prev, r_prev};
    const Recompute mode = recompute_.for_stage(ModelConfig::is_attention_stage(i));
    if (storing_bf16_ && mode != Recompute::kFull) {
      // The whole stage in fp32 in transient_ (selective's cheap buffers forgotten there), then
      // what it keeps stored in arena_.
      const Arena::Mark mark = transient_.mark();
      Arena* cheap = mode == Recompute::kSelective ? &transient_ : nullptr;
      stage_forward(i, a.h, rope, shard, &merge, cheap, &transient_);
      if (!ModelConfig::is_attention_stage(i)) observe_router(i);
      store_stage(i);
      transient_.rewind(mark);
    } else if (mode == Recompute::kSelective) {
      const Arena::Mark mark = transient_.mark();
      stage_forward(i, a.h, rope, shard, &merge, &transient_);
      if (!ModelConfig::is_attention_stage(i)) observe_router(i);
      transient_.rewind(mark);
    } else if (mode == Recompute::kFull) {
      // Keep the stage's input and output (and a MoE stage's routes and router state, which the
      // trainer and the next MoE stage read); the rest is recomputed in backward().
      if (!ModelConfig::is_attention_stage(i)) {
        a.kept_route = arena_.ints(N);
        a.kept_state = arena_.floats(size_t(N) * size_t(config_.router_dim));
      }
      const Arena::Mark mark = arena_.mark();
      stage_forward(i, a.h, rope, shard, &merge);
      if (!ModelConfig::is_attention_stage(i)) {
        observe_router(i);
        be().copy(a.kept_route, a.moe.route, sizeof(int32_t) * size_t(N));
        be().copy(a.kept_state, a.moe.state, sizeof(float) * size_t(N) * config_.router_dim);
      }
      arena_.rewind(mark);
    } else {
      stage_forward(i, a.h, rope, shard, &merge);
      if (!ModelConfig::is_attention_stage(i)) observe_router(i);
    }
    h_prev = a.h;
    r_prev = a.r;
    if (storing_bf16_ && i > 0) store_stream(i - 1);  // stage i's merge was its last reader
  }
}

void ZayaModel::store_stream(int i) {
  const int N = B_ * T_, E = int(config_.hidden_size);
  StageActivations& a = acts_[size_t(i)];
  store_saved(
      [&](SavedBuffers& visit) {
        visit.floats(a.r, size_t(N) * E, SavedKind::kBulk);
        visit.floats(a.h, size_t(N) * E, SavedKind::kBulk);
      },
      arena_, be(), a.stored_stream);
}

// Into the slot the forward computed them in: free again, as the stage two above, which used it
// last, is done.
void ZayaModel::restore_stream(int i) {
  StageActivations& a = acts_[size_t(i)];
  const StreamSlot& slot = stream_slots_[i % 2];
  for (const StoredBf16& s : a.stored_stream) {
    float* values = s.slot == &a.r ? slot.r : slot.h;
    be().widen_bf16(values, s.bits, s.n);
    *s.slot = values;
  }
  a.stored_stream.clear();
}

const float* ZayaModel::router_state_out(int i) const {
  const StageActivations& a = acts_[size_t(i)];
  return a.kept_state ? a.kept_state : a.moe.state;
}

void ZayaModel::stage_forward(int i, float* h, const RopeTables& rope, const ContextShard* shard,
                              const MergeInputs* merge_from, Arena* transient, Arena* kept) {
  const int N = B_ * T_, E = int(config_.hidden_size);
  const StageWeights& st = stages_[size_t(i)];
  StageActivations& a = acts_[size_t(i)];
  Arena& keep = kept ? *kept : arena_;
  Arena& cheap = transient ? *transient : keep;
  a.rstd = cheap.floats(N);
  a.x = cheap.floats(size_t(N) * E);
  const float eps = float(config_.norm_eps);
  if (merge_from)  // r_i = (h_{i-1} + hb) ⊙ hs + (r_{i-1} + rb) ⊙ rs, then x_i = RMSNorm(r_i)
    be().merge_rmsnorm_forward(a.r, a.x, a.rstd, merge_from->h_prev, st.hb, st.hs,
                               merge_from->r_prev, st.rb, st.rs, st.norm_w, N, E, eps);
  else
    be().rmsnorm_forward(a.x, a.rstd, a.r, st.norm_w, N, E, eps);
  if (ModelConfig::is_attention_stage(i)) {
    cca_forward(h, a.cca, a.x, st.cca, rope, config_, B_, T_, keep, shard, be(), transient);
  } else {
    moe_stage_forward(i, h, transient, keep);
  }
  if (transient) {  // the caller frees them: forget them
    a.rstd = a.x = nullptr;
    a.cca.x = a.moe.x = nullptr;
  }
}

void ZayaModel::moe_stage_forward(int i, float* h, Arena* transient, Arena& kept) {
  const int N = B_ * T_;
  const StageWeights& st = stages_[size_t(i)];
  StageActivations& a = acts_[size_t(i)];
  const int32_t* held = nullptr;
  if (!held_routes_.empty()) {
    const size_t k = size_t(i / 2);  // MoE stages are the odd ones
    ZAYA_CHECK(k < held_routes_.size() && held_routes_[k].size() == size_t(N), "hold_routes: no [",
               N, "] routes for MoE stage ", i);
    for (int32_t r : held_routes_[k])
      ZAYA_CHECK(r >= 0 && r <= int32_t(config_.num_experts), "hold_routes: route ", r,
                 " outside [0, ", config_.num_experts, "]");
    held = held_routes_[k].data();
  }
  // The router state comes from the previous MoE stage (two stages back), none before the first.
  const float* state_in = i >= 3 ? router_state_out(i - 2) : nullptr;
  moe_forward(h, a.moe, a.x, state_in, st.moe, config_, N, kept, held, be(), transient);
}

void ZayaModel::store_stage(int i) {
  const int N = B_ * T_, E = int(config_.hidden_size);
  StageActivations& a = acts_[size_t(i)];
  a.stored.clear();
  const bool attention = ModelConfig::is_attention_stage(i);
  store_saved(
      [&](SavedBuffers& visit) {
        visit.floats(a.rstd, size_t(N), SavedKind::kFp32);
        visit.floats(a.x, size_t(N) * E, SavedKind::kBulk);
        if (attention)
          visit_saved(a.cca, config_, B_, T_, visit);
        else
          visit_saved(a.moe, config_, N, visit);
      },
      arena_, be(), a.stored);
  a.cca.x = a.moe.x = nullptr;  // the block's view of a.x, set again by restore_stage
}

void ZayaModel::restore_stage(int i) {
  StageActivations& a = acts_[size_t(i)];
  restore_saved(a.stored, transient_, be());
  a.cca.x = a.moe.x = a.x;
}

void ZayaModel::rebuild_stage(int i, const RopeTables& rope, const ContextShard* shard) {
  const int N = B_ * T_, E = int(config_.hidden_size);
  const StageWeights& st = stages_[size_t(i)];
  StageActivations& a = acts_[size_t(i)];
  a.rstd = transient_.floats(N);
  a.x = transient_.floats(size_t(N) * E);
  be().rmsnorm_forward(a.x, a.rstd, a.r, st.norm_w, N, E, float(config_.norm_eps));
  if (ModelConfig::is_attention_stage(i)) {
    a.cca.x = a.x;
    cca_rebuild(a.cca, st.cca, rope, config_, B_, T_, transient_, shard, be());
  } else {
    a.moe.x = a.x;
    moe_rebuild(a.moe, st.moe, config_, N, transient_, be());
  }
}

// Stage L−1 … 0, from the gradients w.r.t. the last stage's output and merged residual to the
// gradient w.r.t. the embedding's output (returned); each stage's gradients are reported final
// (set_gradients_final) when `report`.
float* ZayaModel::stages_backward(StreamGrads top, bool report) {
  const int N = B_ * T_, E = int(config_.hidden_size);
  const int L = int(config_.num_stages), R = int(config_.router_dim);
  const RopeTables rope = !be().host_memory() ? dev_rope_
                          : sharded_          ? RopeTables{local_cos_.data(), local_sin_.data()}
                                              : RopeTables{rope_cos_.data(), rope_sin_.data()};
  const ContextShard* shard = sharded_ ? &shard_ : nullptr;
  float* dh = top.dh;
  float* dr = top.dr;
  // The gradients that flow from stage to stage live in two pairs of buffers taken here; what a
  // stage's backward takes besides is freed when the stage is done (and, with recompute, so is
  // its recomputed forward), so the backward holds one stage's temporaries at a time.
  float* dh_next = arena_.floats(size_t(N) * E);
  float* dr_next = arena_.floats(size_t(N) * E);
  const bool chained_moe = config_.num_moe_stages() >= 2;  // router-state gradients to pass on
  float* dstate_buf[2] = {chained_moe ? arena_.floats(size_t(N) * R) : nullptr,
                          chained_moe ? arena_.floats(size_t(N) * R) : nullptr};
  float* dstate = nullptr;  // gradient w.r.t. the router state flowing back across MoE stages
  for (int i = L - 1; i >= 0; --i) {
    const trace::Span span("model", [&] { return "stage " + std::to_string(i) + " backward"; });
    const StageWeights& st = stages_[i];
    StageGrads& sg = grads_[i];
    StageActivations& a = acts_[i];
    const Arena::Mark mark = arena_.mark(), transient_mark = transient_.mark();
    const Recompute mode = recompute_.for_stage(ModelConfig::is_attention_stage(i));
    commit_grads_of(i);
    if (!a.stored.empty()) restore_stage(i);
    if (i > 0 && !acts_[i - 1].stored_stream.empty()) restore_stream(i - 1);  // the merge's inputs
    if (mode == Recompute::kFull) stage_forward(i, arena_.floats(size_t(N) * E), rope, shard);
    if (mode == Recompute::kSelective) rebuild_stage(i, rope, shard);
    float* dx = arena_.zeros(size_t(N) * E);
    if (ModelConfig::is_attention_stage(i)) {
      cca_backward(dx, sg.cca, dh, a.cca, st.cca, rope, config_, B_, T_, arena_, shard, be());
    } else {
      float* dstate_in = nullptr;
      if (a.moe.state_in) {
        dstate_in = dstate_buf[0] == dstate ? dstate_buf[1] : dstate_buf[0];
        be().fill_zero(dstate_in, sizeof(float) * size_t(N) * R);
      }
      moe_backward(dx, dstate_in, sg.moe, dh, dstate, a.moe, st.moe, config_, N, arena_, be());
      dstate = dstate_in;
    }
    // x_i = RMSNorm(r_i): add its gradient to the one r_i already has from the next merge.
    be().rmsnorm_backward(dr, sg.norm_w, dx, a.r, st.norm_w, a.rstd, N, E);
    // r_i = (h_{i-1} + hb) ⊙ hs + (r_{i-1} + rb) ⊙ rs.
    const float* h_prev = i > 0 ? acts_[i - 1].h : emb_;
    const float* r_prev = i > 0 ? acts_[i - 1].r : nullptr;
    float* dh_prev = dh_next;
    float* dr_prev = r_prev ? dr_next : nullptr;
    be().fill_zero(dh_prev, sizeof(float) * size_t(N) * E);
    if (dr_prev) be().fill_zero(dr_prev, sizeof(float) * size_t(N) * E);
    be().residual_merge_backward(dh_prev, sg.hb, sg.hs, dr_prev, sg.rb, sg.rs, dr, h_prev, st.hb,
                                 st.hs, r_prev, st.rb, st.rs, N, E);
    arena_.rewind(mark);
    transient_.rewind(transient_mark);
    dh_next = dh;
    dr_next = dr;
    dh = dh_prev;
    dr = dr_prev;
    if (gradients_final_ && report) gradients_final_(final_from_[size_t(i)]);
  }
  return dh;
}

}  // namespace zaya
