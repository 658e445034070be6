// The ZAYA1 stack: tied embedding → L stages (CCA at even, MoE at odd indices), each opened by the
// two-stream residual scaling and an RMSNorm → final residual merge → final RMSNorm → tied LM head
// → mean next-token cross-entropy. forward() keeps what backward() needs in one arena per step.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "backend/op_types.h"
#include "core/arena.h"
#include "model/cca.h"
#include "model/config.h"
#include "model/context_shard.h"
#include "model/moe.h"
#include "model/parameter_placement.h"
#include "model/params.h"
#include "model/recompute.h"
#include "model/stored_activations.h"

namespace zaya {

class ZayaModel {
 public:
  explicit ZayaModel(const ModelConfig& config);

  const ModelConfig& config() const { return config_; }
  ParamStore& params() { return placement_.params(); }
  const ParamStore& params() const { return placement_.params(); }
  // Where the parameters and gradients live (host, the backend's memory, bf16 storage), and the
  // moves between those places: model/parameter_placement.h.
  ParameterPlacement& placement() { return placement_; }
  const ParameterPlacement& placement() const { return placement_; }

  // tokens[B·S] (row-major [B, S]); targets[B·S] with kIgnoreIndex where no loss is taken.
  // Returns the mean loss over the non-ignored targets (0 if there are none). With an empty
  // `targets` no loss is computed (inference: logits only).
  //
  // Context parallelism (set_context_group): every rank of the group passes the whole sequences,
  // and computes on its rows of them (ContextShard::take, [B, local_len]); the
  // loss is the mean over every rank of the group's targets (the same value on each), and
  // backward() leaves on each rank its share of the gradient: their sum over the group is the
  // gradient of the whole sequences. Every rank of the group must call forward and backward.
  float forward(std::span<const int32_t> tokens, std::span<const int32_t> targets, int B, int S);
  // Accumulates loss_scale · d(mean loss)/dθ into params().grads(). Requires a forward() with
  // targets. Gradient accumulation over k equal micro-batches passes loss_scale = 1/k.
  void backward(float loss_scale = 1.0f);

  // Called by the following backward() calls each time the gradient at flat offsets
  // [offset, params().size()) is final for that backward: after the final norm and merge, after
  // each stage, and with 0 at the end; the gradients are params().grads(), or backend_grads()
  // when resident. The trainer starts ZeRO-1's reduce-scatter buckets from it while the
  // backward goes on (Zero1Sync::grads_final_from). An empty function: no calls.
  void set_gradients_final(std::function<void(int64_t offset)> fn) {
    gradients_final_ = std::move(fn);
  }

  // Following forward() calls (not the recomputed ones of a backward) hand each MoE stage's router
  // logits [rows, routes] to `fn`, copied to the host: k counts the MoE stages from 0. The step
  // accounting reads the routers' per-token health from them (train/step_accounting.h). An empty
  // function (the default): no copies.
  using RouterLogitsObserver =
      std::function<void(int k, std::span<const float> logits, int routes)>;
  void set_router_logits_observer(RouterLogitsObserver fn) { router_observer_ = std::move(fn); }

  // Test hook: following forward() calls take these routes (one [B·S] vector per MoE stage, in
  // stage order) instead of choosing top-1, so that finite differences can cross a near-tie.
  // An empty argument returns to normal routing.
  void hold_routes(std::vector<std::vector<int32_t>> routes) { held_routes_ = std::move(routes); }

  // Following forward() calls spread each sequence over the ranks of `group`
  // (model/context_shard.h); null returns to whole sequences. The group must outlive its use.
  void set_context_group(dist::Communicator* group) { context_group_ = group; }
  dist::Communicator* context_group() const { return context_group_; }

  // The backend the following forward() and backward() calls compute on (backend/backend.h);
  // the CPU's by default. The backend must outlive the model.
  //
  // A backend without host memory (a GPU) gets copies of the parameters in its memory and the
  // step's arena there too. The host ParamStore stays the master: forward() copies the weights
  // over, backward() computes the gradients there and adds them to params().grads() at its end
  // (so set_gradients_final reports only offset 0, then, unless the parameters are resident:
  // placement().set_resident). logits(), routes() and route_probs() copy to the host. Context
  // parallelism runs on host-memory backends only. The parameters' side of it (their copies,
  // residency, bf16 storage) is the placement's.
  void set_backend(const Backend& backend);
  const Backend& backend() const { return placement_.backend(); }

  // RoPE base for the following forward() calls (curriculum phases change it).
  void set_rope_theta(double theta);

  // Following forward() calls with targets compute the LM head and the loss in blocks of
  // chunks.tokens × chunks.vocab logits (backend/cpu/lm_head_loss.h) and keep no logits; disabled
  // chunks (the default) materialise them. Forward calls without targets always materialise.
  void set_lm_head_chunks(const LmHeadChunks& chunks) { lm_chunks_ = chunks; }

  // What following forward() calls keep for backward() (model/recompute.h): everything; the
  // products' outputs, with the cheap buffers between them made again just before each stage's
  // backward (selective); or each stage's input and output alone, the whole stage run forward
  // again (full). The gradients are bitwise the same (what is made again is made by the same
  // ops from the same values).
  // Each kind of stage may keep differently (RecomputePlan); one mode sets both.
  void set_recompute(RecomputePlan plan) { recompute_ = plan; }
  RecomputePlan recompute() const { return recompute_; }

  // How following training forward() calls (with targets) keep what the backward reads
  // (model/stored_activations.h): fp32 (the default), or its bulk rounded to bf16 and widened
  // again before each stage's backward, every op computing in fp32 (for a device's memory: the
  // CPU backend stays the fp32 oracle, its trainer refuses bf16). Under full recompute that is
  // the stages' residual streams alone. Not with context parallelism.
  void set_activation_storage(ActivationStorage storage) { activation_storage_ = storage; }
  ActivationStorage activation_storage() const { return activation_storage_; }

  // Valid after forward() and until backward() (which reuses the buffer for the gradient); not
  // after a chunked forward (set_lm_head_chunks), which keeps no logits.
  std::span<const float> logits() const;
  // Route chosen by each token at MoE stage `stage` (global stage index, odd), after forward().
  std::span<const int32_t> routes(int stage) const;
  // Router probabilities [B·S, X+1] of MoE stage `stage` after forward().
  std::span<const float> route_probs(int stage) const;
  int64_t loss_count() const { return loss_count_; }
  size_t arena_bytes() const { return arena_.capacity(); }
  // Bytes of activations the last forward (+ backward) took; train/train_memory.h predicts it.
  // Sizes the step's arena and selective recompute's to these many bytes before a step
  // (train/train_memory.h's activation_arenas), so that no step grows them.
  void reserve_activations(size_t step_bytes, size_t transient_bytes) {
    arena_.reserve(step_bytes);
    transient_.reserve(transient_bytes);
  }
  // Both arenas: the step's and selective recompute's one stage of cheap buffers.
  size_t arena_high_water() const { return arena_.high_water() + transient_.high_water(); }
  // The same for the last forward (+ backward) alone.
  size_t step_activation_bytes() const {
    return arena_.step_high_water() + transient_.step_high_water();
  }

  // Next-token targets as Hugging Face computes the loss: targets[b, s] = tokens[b, s+1] and the
  // last position of each sequence is ignored.
  static std::vector<int32_t> shifted_targets(std::span<const int32_t> tokens, int B, int S);

  // A stage's tensors: its weights (StageWeights, read by the forward and backward) or their
  // gradients (StageGrads, added into by the backward), filled by one binding (bind_stage).
  template <class Views>
  struct StageTensors {
    typename Views::Plain norm_w, hs, hb, rs, rb;
    CcaTensors<Views> cca{};
    MoeTensors<Views> moe{};
  };
  using StageWeights = StageTensors<WeightViews>;
  using StageGrads = StageTensors<GradViews>;

  // What decoding reads (model/decode_step.h), in the backend's memory, fp32 (decoding's row
  // products take fp32 weights; a model whose weights are kept in bf16 alone cannot decode):
  // stage i's weights, and the final merge's scales, the final norm's and the tied embedding.
  const StageWeights& decoding_weights(int i);
  struct HeadWeights {
    const float *hs, *hb, *rs, *rb;  // model.res_scale
    const float* norm_w;             // model.final_norm
    const float* embedding;          // [V, E], the tied LM head
  };
  HeadWeights decoding_head();
  // A decoder's prefill of one sequence: forward(prompt) without targets (logits() then holds
  // every position's), with every stage's activations kept even under recompute, then
  // cache(a, act) for each attention stage a with what its decode state starts from: the keys and
  // values of every position (act.k, act.v: [S, kv_dim]) and the convolution inputs
  // (cca_state_from_forward). In the backend's memory, valid during the call.
  void prefill(std::span<const int32_t> prompt,
               const std::function<void(int a, const CcaActivations& act)>& cache);

 private:
  struct StageActivations {
    float* r = nullptr;     // merged residual r_i [N, E]
    float* rstd = nullptr;  // [N]
    float* x = nullptr;     // RMSNorm(r_i) [N, E]
    float* h = nullptr;     // block output [N, E]
    CcaActivations cca;
    MoeActivations moe;
    int32_t* kept_route = nullptr;   // with recompute: the MoE stage's routes [N]
    float* kept_state = nullptr;     // with recompute: its router state [N, R]
    std::vector<StoredBf16> stored;  // with bf16 storage: the bulk kept in bf16 (its slots here)
    std::vector<StoredBf16> stored_stream;  // and r and h, once the next stage has read them
  };

  // Points the stage views at the weights and gradients the ops use (the placement's weight and
  // grad); ensure_bound does when the placement's layout changed
  // since (forward, backward and the decoder call it before they read the views).
  void bind_weights();
  void ensure_bound() {
    if (bound_layout_ != placement_.layout_version()) bind_weights();
  }
  // Stage i's views: `product` gives the products' weights (or gradients) at flat offsets,
  // `plain` every other tensor's.
  template <class Views, class Product, class Plain>
  StageTensors<Views> bind_stage(int i, Product product, Plain plain) const;
  const Backend& be() const { return placement_.backend(); }
  // RMSNorm of stage i's merged residual and its block (CCA or MoE) into h [N, E]; fills
  // acts_[i] but r and h. Used by forward() and, with recompute, by backward().
  // With merge_from (the previous stage's h and r), the merge into acts_[i].r comes first, fused
  // with the norm (Backend::merge_rmsnorm_forward); without it acts_[i].r already holds the
  // merged residual (recompute in the backward).
  struct MergeInputs {
    const float* h_prev;
    const float* r_prev;
  };
  // With `transient` (selective recompute), the norm's and the block's cheap buffers come from
  // it (cca_forward, moe_forward) and the caller frees them after the stage.
  // With `kept`, what the stage keeps comes from it instead of arena_ (bf16 storage: a scratch
  // arena, the stage stored from there by store_stage).
  void stage_forward(int i, float* h, const RopeTables& rope, const ContextShard* shard,
                     const MergeInputs* merge_from = nullptr, Arena* transient = nullptr,
                     Arena* kept = nullptr);
  // The MoE block of stage i (stage_forward's second half).
  void moe_stage_forward(int i, float* h, Arena* transient, Arena& kept);
  // bf16 activation storage: stage i's kept buffers moved from transient_ into arena_ (the bulk
  // in bf16), and before its backward widened back into transient_.
  void store_stage(int i);
  void restore_stage(int i);
  // bf16 storage of stage i's residual stream (r, h) once stage i+1's forward has read it, and
  // before stage i+1's backward widened back into stage i's slot of stream_slots_.
  void store_stream(int i);
  void restore_stream(int i);
  // Selective recompute, before stage i's backward: its norm and block's cheap buffers again, in
  // transient_.
  void rebuild_stage(int i, const RopeTables& rope, const ContextShard* shard);
  // forward()'s parts: the inputs checked, this rank's rows of them (and of RoPE's tables) taken
  // into the backend's memory, the stages, and the final merge, norm, LM head and loss.
  void check_inputs(std::span<const int32_t> tokens, std::span<const int32_t> targets, int B,
                    int S) const;
  RopeTables take_inputs(std::span<const int32_t> tokens, std::span<const int32_t> targets, int B,
                         int S);
  void stages_forward(const RopeTables& rope);
  float head_forward();
  WeightRef embedding_weights() const;
  size_t embedding_offset() const;
  // backward()'s parts: the head (loss, LM head, final norm and merge) and the stages.
  struct StreamGrads {
    float* dh;  // w.r.t. a stage's output h_i
    float* dr;  // w.r.t. its merged residual r_i
  };
  StreamGrads head_backward(float loss_scale);
  float* stages_backward(StreamGrads top, bool report);
  // The router state MoE stage i passes on.
  const float* router_state_out(int i) const;
  // Hands MoE stage i's router logits to the observer (set_router_logits_observer).
  void observe_router(int i);
  // The mean loss from this rank's sum (and loss_count_), over the context group when sharded.
  float mean_loss(double total);
  void rope_for(int S);

  ModelConfig config_;
  ParameterPlacement placement_;
  // With a backend of its own memory (set_backend): the arena's memory there (declared before
  // arena_, which releases its blocks through it).
  std::unique_ptr<ArenaMemory> arena_memory_;
  // final_from_[i]: the lowest flat offset above every tensor whose gradient stages i-1 … 0 and
  // the embedding still write (final_from_[L]: above every stage); see set_gradients_final.
  std::vector<int64_t> final_from_;
  // Before the backward adds into a gradient it commits it (ParameterPlacement::commit_grads;
  // ZeRO-2 keeps gradient memory on demand): the flat spans of each stage's tensors
  // (grad_spans_[i], i < L) and of the model-level ones, the embedding and the final tensors
  // (grad_spans_[L]).
  std::vector<std::vector<std::pair<size_t, size_t>>> grad_spans_;
  void commit_grads_of(int stage_or_model);
  std::function<void(int64_t)> gradients_final_;
  RouterLogitsObserver router_observer_;
  std::vector<float> host_router_logits_;  // the observer's copy on a device backend
  uint64_t bound_layout_ = 0;              // the placement's layout_version the views were bound at
  std::vector<StageWeights> stages_;
  // The stages' fp32 weights, which decoding reads (its row products are fp32): stages_ itself
  // unless the products read bf16 copies.
  std::vector<StageWeights> fp32_stages_;
  std::vector<StageGrads> grads_;
  Arena arena_;
  // Selective recompute's cheap buffers of one stage at a time (forward and backward), in the
  // same memory as arena_.
  Arena transient_;

  ActivationStorage activation_storage_ = ActivationStorage::kFp32;

  // Per-step state.
  bool storing_bf16_ = false;  // this forward stores its activations in bf16
  // With bf16 storage, where stage i computes its r and h (slot i % 2) in fp32.
  struct StreamSlot {
    float *r = nullptr, *h = nullptr;
  };
  StreamSlot stream_slots_[2];
  int B_ = 0, S_ = 0;
  int T_ = 0;  // rows per sequence here: S_, or the context shard's local_len()
  dist::Communicator* context_group_ = nullptr;
  ContextShard shard_;  // valid when the last forward ran under a context group
  bool sharded_ = false;
  RecomputePlan recompute_;
  std::vector<int32_t> tokens_, targets_;
  // The tokens, targets and RoPE rows the ops read: the host ones above, or copies in the arena
  // on a backend of its own memory.
  const int32_t* op_tokens_ = nullptr;
  const int32_t* op_targets_ = nullptr;
  mutable std::vector<float> host_logits_, host_probs_;  // copies for logits(), route_probs()
  mutable std::vector<int32_t> host_routes_;             // and routes()
  RopeTables dev_rope_;  // the last forward's RoPE rows in the backend's memory
  std::vector<std::vector<int32_t>> held_routes_;
  std::vector<StageActivations> acts_;
  float* emb_ = nullptr;      // h_{-1}: embedded tokens [N, E]
  float* final_r_ = nullptr;  // merged residual after the last stage
  float* final_rstd_ = nullptr;
  float* final_y_ = nullptr;  // final_norm output
  float* logits_ = nullptr;   // [N, V]
  float* lse_ = nullptr;      // [N]
  int64_t loss_count_ = 0;
  bool have_loss_ = false;
  bool logits_valid_ = false;
  LmHeadChunks lm_chunks_;
  bool chunked_loss_ = false;    // the last forward computed the loss in blocks
  float* lm_scratch_ = nullptr;  // its one block of logits

  // RoPE tables cache.
  int rope_seq_ = -1;
  std::vector<float> rope_cos_, rope_sin_;
  std::vector<float> local_cos_, local_sin_;  // the rows of the local positions (context shard)
};

}  // namespace zaya
