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
#include "core/reserved_addresses.h"
#include "model/cca.h"
#include "model/config.h"
#include "model/context_shard.h"
#include "model/moe.h"
#include "model/params.h"

namespace zaya {

class ZayaModel {
 public:
  explicit ZayaModel(const ModelConfig& config);

  const ModelConfig& config() const { return config_; }
  ParamStore& params() { return params_; }
  const ParamStore& params() const { return params_; }

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
  // see set_resident). logits(), routes() and route_probs()
  // copy to the host. Context parallelism runs on host-memory backends only.
  void set_backend(const Backend& backend);
  const Backend& backend() const { return *be_; }

  // On a backend of its own memory: keep the parameters there between steps, for a training loop
  // whose optimizer runs on the backend too (optim/optimizer.h). forward() then reads the
  // backend's weights as they are, backward() adds into the backend's gradients and leaves them
  // there, and zero_grads() zeroes them there: nothing crosses per micro-batch but the tokens.
  // The host ParamStore becomes a copy, refreshed by pull_weights() and sent back by
  // push_weights(). Turning it on sends the weights over and zeroes the gradients. Host-memory
  // backends have one copy already: there, these calls only zero the gradients or do nothing.
  void set_resident(bool resident);
  bool resident() const { return resident_ && !be_->host_memory(); }
  // The weights and gradients the ops use, in the backend's memory (the ParamStore's on the host).
  // Not with bf16 weight storage, where the weights are not one fp32 buffer (master_weights()).
  float* backend_weights();
  // Not with bf16 gradients (load_grads).
  float* backend_grads();
  void zero_grads();
  void push_weights();                         // host → backend, every weight
  void push_weights(size_t offset, size_t n);  // host → backend, flat [offset, offset + n)
  void pull_weights();                         // backend → host, every weight

  // bf16 weight storage, for a backend whose products take bf16 weights (Backend::bf16_weights):
  // the weights of the products (the Muon matrices and the tied embedding, which is also
  // gathered) live in the backend's memory as bf16 alone, the other tensors (norms, biases,
  // convolutions, scales: a few per mille of the parameters) in fp32, and the fp32 master
  // weights of the flat range [master_begin, master_end) (the rank's ZeRO-1 range, which its
  // optimizer updates) beside them: 2 bytes per parameter plus 4 per parameter of the range,
  // where full fp32 weights and their bf16 copy take 6. The products read the bf16 values the
  // fp32 path would round them to, so the two paths compute the same bits.
  //
  // Takes effect on a backend with bf16 weights and its own memory (now or at the next
  // set_backend); elsewhere the weights stay one fp32 buffer. The trainer then updates
  // master_weights() and writes every range it changes back with store_weights; push_weights
  // and pull_weights convert (the host copy holds the master values in the range and the stored
  // values elsewhere).
  //
  // With bf16_gradients the Muon matrices' gradients are kept in bf16 too (2 bytes each instead
  // of 4; every other gradient stays fp32, the embedding's among them): each product's backward
  // adds its fp32 result into them with one rounding, so accumulating micro-batches rounds once
  // per micro-batch. Needs resident parameters; the gradients are then read with load_grads.
  void set_bf16_weight_storage(size_t master_begin, size_t master_end, bool bf16_gradients = false);
  bool bf16_weight_storage() const { return !stored_runs_.empty(); }  // in effect
  bool bf16_gradients() const { return bf16_weight_storage() && bf16_grads_wanted_; }
  // The gradients of flat [offset, offset + n) as fp32 into dst (backend memory), from wherever
  // they are kept (the bf16 ones widened); with fp32 gradients a copy of backend_grads().
  void load_grads(size_t offset, size_t n, float* dst);
  // Every gradient = value (the bf16 ones rounded): the trainer's NaN drill.
  void fill_grads(float value);
  float* master_weights() { return dev_master_.floats(); }  // [end − begin]
  // Writes flat [offset, offset + n) from fp32 values in the backend's memory: the bf16 tensors
  // rounded, the others copied (not the master weights).
  void store_weights(size_t offset, size_t n, const float* values);
  // ZeRO-1's all-gather in bf16 (Zero1Sync::WeightCodec): the values of flat [offset, offset + n)
  // travel as the bf16 of the bf16 tensors plus, in order, the fp32 tensors' values (a few per
  // mille). fp32_count: how many of those; pack_weights: the two parts of fp32 values (the
  // master's); store_packed_weights: the inverse, into the storage. Backend memory throughout.
  int64_t fp32_count(size_t offset, size_t n) const;
  void pack_weights(size_t offset, size_t n, const float* values, uint16_t* bf16,
                    float* fp32) const;
  void store_packed_weights(size_t offset, size_t n, const uint16_t* bf16, const float* fp32);
  // Bytes of weights in the backend's memory (fp32 buffer, or bf16 + fp32 + master).
  size_t weight_bytes() const;
  size_t grad_bytes() const;  // and of gradients (fp32 buffer, or bf16 + fp32)

  // RoPE base for the following forward() calls (curriculum phases change it).
  void set_rope_theta(double theta);

  // Following forward() calls with targets compute the LM head and the loss in blocks of
  // chunks.tokens × chunks.vocab logits (backend/cpu/lm_head_loss.h) and keep no logits; disabled
  // chunks (the default) materialise them. Forward calls without targets always materialise.
  void set_lm_head_chunks(const LmHeadChunks& chunks) { lm_chunks_ = chunks; }

  // Recomputation: following forward() calls keep only each stage's input and output (and a MoE
  // stage's routes and router state), and backward() runs each stage's forward again just before
  // its backward: activations of about 2 rows per stage instead of all of them, for one more
  // forward. The gradients are bitwise the same (the recomputed forward is deterministic).
  void set_recompute(bool on) { recompute_ = on; }
  bool recompute() const { return recompute_; }

  // Valid after forward() and until backward() (which reuses the buffer for the gradient); not
  // after a chunked forward (set_lm_head_chunks), which keeps no logits.
  std::span<const float> logits() const;
  // Route chosen by each token at MoE stage `stage` (global stage index, odd), after forward().
  std::span<const int32_t> routes(int stage) const;
  // Router probabilities [B·S, X+1] of MoE stage `stage` after forward().
  std::span<const float> route_probs(int stage) const;
  int64_t loss_count() const { return loss_count_; }
  size_t arena_bytes() const { return arena_.capacity(); }
  // Bytes of activations the last forward (+ backward) took; sizing/train_memory.h predicts it.
  size_t arena_high_water() const { return arena_.high_water(); }

  // Next-token targets as Hugging Face computes the loss: targets[b, s] = tokens[b, s+1] and the
  // last position of each sequence is ignored.
  static std::vector<int32_t> shifted_targets(std::span<const int32_t> tokens, int B, int S);

 private:
  friend class BatchDecoder;  // infer/batch_decoder.h: reads the stage weights and prefill
                              // activations
  struct Stage {
    const float *norm_w, *hs, *hb, *rs, *rb;
    CcaWeights cca{};
    MoeWeights moe{};
  };
  struct StageGrads {
    float *norm_w, *hs, *hb, *rs, *rb;
    CcaGrads cca{};
    MoeGrads moe{};
  };
  struct StageActivations {
    float* r = nullptr;     // merged residual r_i [N, E]
    float* rstd = nullptr;  // [N]
    float* x = nullptr;     // RMSNorm(r_i) [N, E]
    float* h = nullptr;     // block output [N, E]
    CcaActivations cca;
    MoeActivations moe;
    int32_t* kept_route = nullptr;  // with recompute: the MoE stage's routes [N]
    float* kept_state = nullptr;    // with recompute: its router state [N, R]
  };

  // Points the stage views at the weights and gradients the ops use (weight_address and
  // grad_address: the ParamStore's, their copies in a backend's memory, or the bf16 storage).
  void bind_weights();
  const float* weights_base() const;
  // The address the ops read the weight at flat `offset` from: weights_base() + offset, or with
  // bf16 weight storage the reserved address (bf16 tensors) or the fp32 tensors' buffer.
  const float* weight_address(size_t offset) const;
  // The same for the gradient the backward adds into at flat `offset`: grads_base() + offset,
  // or with bf16 gradients the reserved address or the fp32 gradients' buffer.
  float* grad_address(size_t offset);
  // Releases every copy of the parameters in a backend's memory (and the storage's layout).
  void release_device_parameters();
  // Lays out the bf16 weight storage in the backend's memory (set_backend then fills it).
  void lay_out_bf16_storage();
  // Moves host [offset, offset + n) into the storage (push) or back (pull), through the staging
  // buffer, a chunk at a time.
  void push_stored(size_t offset, size_t n);
  void pull_stored();
  float* grads_base();
  // RMSNorm of stage i's merged residual and its block (CCA or MoE) into h [N, E]; fills
  // acts_[i] but r and h. Used by forward() and, with recompute, by backward().
  // With merge_from (the previous stage's h and r), the merge into acts_[i].r comes first, fused
  // with the norm (Backend::merge_rmsnorm_forward); without it acts_[i].r already holds the
  // merged residual (recompute in the backward).
  struct MergeInputs {
    const float* h_prev;
    const float* r_prev;
  };
  void stage_forward(int i, float* h, const RopeTables& rope, const ContextShard* shard,
                     const MergeInputs* merge_from = nullptr);
  // The router state MoE stage i passes on.
  const float* router_state_out(int i) const;
  // The mean loss from this rank's sum (and loss_count_), over the context group when sharded.
  float mean_loss(double total);
  void rope_for(int S);

  ModelConfig config_;
  ParamStore params_;
  const Backend* be_ = &cpu_backend();
  // With a backend of its own memory (set_backend): the parameters' copies there, and the
  // arena's memory (declared before arena_, which releases its blocks through it).
  BackendBuffer dev_weights_, dev_grads_;
  bool resident_ = false;  // see set_resident
  // bf16 weight storage (set_bf16_weight_storage): the flat layout as runs of tensors of one
  // kind, the reserved fp32 addresses of the bf16 ones, and the buffers.
  struct StoredRun {
    size_t begin = 0, n = 0;  // flat [begin, begin + n)
    bool bf16 = false;        // the weights in bf16 (else in dev_w32_ at fp32_at)
    bool bf16_grads = false;  // the gradients in bf16 (else in dev_g32_ at grad_fp32_at)
    size_t fp32_at = 0, grad_fp32_at = 0;
  };
  const StoredRun& stored_run(size_t offset) const;
  // fn(run, lo, hi) for each run's part [lo, hi) of flat [offset, offset + n), in order.
  void for_each_run(size_t offset, size_t n,
                    const std::function<void(const StoredRun*, size_t, size_t)>& fn) const;
  bool bf16_storage_wanted_ = false, bf16_grads_wanted_ = false;
  size_t master_begin_ = 0, master_end_ = 0;
  std::vector<StoredRun> stored_runs_;
  ReservedAddresses weight_addresses_, grad_addresses_;
  BackendBuffer dev_w16_, dev_w32_, dev_master_, dev_staging_, dev_g16_, dev_g32_;
  std::unique_ptr<ArenaMemory> arena_memory_;
  // final_from_[i]: the lowest flat offset above every tensor whose gradient stages i-1 … 0 and
  // the embedding still write (final_from_[L]: above every stage); see set_gradients_final.
  std::vector<int64_t> final_from_;
  std::function<void(int64_t)> gradients_final_;
  std::vector<Stage> stages_;
  std::vector<StageGrads> grads_;
  Arena arena_;

  // Per-step state.
  int B_ = 0, S_ = 0;
  int T_ = 0;  // rows per sequence here: S_, or the context shard's local_len()
  dist::Communicator* context_group_ = nullptr;
  ContextShard shard_;  // valid when the last forward ran under a context group
  bool sharded_ = false;
  bool recompute_ = false;
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
