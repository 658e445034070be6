// The ZAYA1 optimizer: Muon for OptimGroup::Muon matrices, AdamW for OptimGroup::AdamW tensors,
// OptimGroup::Buffer tensors (router balancing biases; see router_balancer.h) untouched.
//
// One step, given the scheduled lr:
//  1. global gradient norm over every trainable gradient, fp64, in fixed chunks summed in order;
//  2. if grad_clip > 0 and norm > grad_clip, gradients are scaled in place by grad_clip/norm;
//  3. AdamW (t = step_count): W ← W·(1 − lr·wd);  m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²;
//       W ← W − lr·(m/(1−β1ᵗ)) / (sqrt(v/(1−β2ᵗ)) + eps);
//     Muon, per 2-D matrix [rows, cols] (each expert's fc1/fc2 separately):
//       buf ← β·buf + (1−β)·g;  d = (1−β)·g + β·buf (Nesterov) or buf;
//       O = newton_schulz(d);  W ← W·(1 − lr·wd) − lr·0.2·sqrt(max(rows, cols))·O
//     (0.2·sqrt(max) is Moonlight's AdamW RMS matching, so Muon shares AdamW's lr and wd).
// Weight decay applies to tensors with >= 2 dims (Muon matrices, the embedding, conv weights) and
// not to 1-D tensors (norms, biases, residual scales, key temperatures): decaying those pulls
// gains towards 0 rather than regularising a linear map.
//
// State lives in flat fp32 buffers with the registry's layout (a tensor's state is at its weight
// offset), so ZeRO-1 and checkpoints can cut it by offset: "exp_avg" holds AdamW's m and Muon's
// momentum buffer, "exp_avg_sq" AdamW's v (zero for Muon and Buffer tensors).
//
// ZeRO-1: given a Communicator, the optimizer keeps state only for its rank's ShardLayout range
// and updates only the weights in that range; the caller reduce-scatters gradients into the
// range before step() and all-gathers weights after (see optim/zero1_sync.h). Everything is
// elementwise except two things: the gradient norm (local fp64 sums added in rank order), and
// Muon's Newton–Schulz, which needs whole matrices. Each rank computes the momentum and the
// Nesterov direction of its own pieces; then, following a MuonPlan (optim/muon_plan.h), pieces
// go to the rank that orthogonalises the matrix, every rank runs Newton–Schulz on its matrices at
// the same time, and the orthogonalised pieces come back for the elementwise weight update.
// With clipping off the result is bitwise that of one process; with clipping the norm's
// summation order differs by world size (relative differences ~1e-7).
//
// The arithmetic runs as ops of a Backend (backend/cpu/optim_ops.h): the CPU's by default, or a
// GPU's, where the weights, gradients and state live in its memory and the step never leaves it
// (one copy back: the norm). The host keeps no copy of that state: a checkpoint copies it out
// when it saves (state_tensors) and a restore sends it back (set_state). Across ranks the norm's
// sum goes over `comm` (host memory) and the Muon pieces over `exchange`, a communicator that moves
// the backend's memory (NCCL for a GPU; by default `comm` itself).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/newton_schulz.h"  // the O = newton_schulz(d) of step 3 above
#include "core/tensor.h"
#include "model/params.h"
#include "optim/muon_plan.h"
#include "optim/optim_config.h"
#include "optim/shard_layout.h"

namespace zaya {

namespace dist {
class Communicator;
}

class Optimizer {
 public:
  // comm == nullptr (or a one-rank communicator): the whole buffer is this process's shard.
  // backend == nullptr: the CPU's. exchange: the communicator of the Muon pieces, which live in
  // the backend's memory (nullptr: comm).
  Optimizer(const ParamRegistry& registry, const OptimConfig& config,
            dist::Communicator* comm = nullptr, const Backend* backend = nullptr,
            dist::Communicator* exchange = nullptr);
  // Any layout of specs (offset, numel, shape, group) over a flat buffer of total_floats.
  Optimizer(std::vector<ParamSpec> specs, size_t total_floats, const OptimConfig& config,
            dist::Communicator* comm = nullptr, const Backend* backend = nullptr,
            dist::Communicator* exchange = nullptr);

  // One update with learning rate `lr`; returns the global gradient norm before clipping. When
  // that norm is not finite the weights and state are left untouched (the caller decides).
  // `weights` is the whole flat buffer (only the shard's range is written); `shard_grads` holds
  // the summed gradients of the shard's range, shard_grads[0] being flat element shard().begin()
  // (with one process: the whole gradient buffer). Clipping scales shard_grads in place. Both
  // are in the backend's memory.
  float step(ParamStore& store, double lr);  // one process on host memory only
  float step(float* weights, float* shard_grads, double lr);
  // The same on the shard's weights alone: shard_weights[0] is flat element shard().begin() (the
  // master weights of ZayaModel's bf16 weight storage).
  float step_shard(float* shard_weights, float* shard_grads, double lr);

  // Checkpointing: the shard's state ("exp_avg", "exp_avg_sq", each [shard().size()], element 0
  // at flat offset shard().begin()) and the number of steps taken (AdamW's bias-correction t).
  // On host memory they are views of the live state; on a backend of its own memory, host
  // copies this call makes (so the host holds the state only while a checkpoint holds them).
  std::map<std::string, Tensor> state_tensors() const;
  // Makes `shard_state` (state_tensors()'s names and sizes, e.g. written by a restore) the live
  // state: on a backend of its own memory it is copied there; on host memory the views of the
  // live state need nothing, other tensors are copied in.
  void set_state(const std::map<std::string, Tensor>& shard_state);
  const Backend& backend() const { return *be_; }
  int64_t step_count() const { return step_count_; }
  // Copies state from whole-buffer tensors ([total_floats], e.g. assembled from a checkpoint of
  // any world size): this rank keeps its range (and sends it to the backend). Names and sizes
  // must match.
  void load_state(const std::map<std::string, Tensor>& state, int64_t step_count);
  // For a restore that set the shard's state (set_state).
  void set_step_count(int64_t step_count);

  const OptimConfig& config() const { return config_; }
  const ShardLayout& shard() const { return shard_; }
  // Bytes this rank sends + receives per step in the Muon exchange (see muon_plan.h).
  int64_t muon_exchange_bytes() const { return muon_.exchange_bytes; }
  // The Newton–Schulz calls of a step: each shape of this rank's matrices, and how many of them
  // one call takes.
  struct NsCall {
    int64_t rows = 0, cols = 0, count = 0;
  };
  std::vector<NsCall> newton_schulz_calls() const;
  const MuonPlan& muon_plan() const { return muon_; }

 private:
  // The tables of the ops, fixed by the layout (offsets relative to shard().begin()).
  void build_tables();
  double grad_norm(const float* shard_grads) const;
  // Muon: momentum and direction of the local pieces, the exchange, Newton–Schulz on this rank's
  // matrices, the exchange back, the weight update.
  void muon_step(float* shard_weights, const float* shard_grads, double lr);
  void exchange_pieces(bool to_owners);

  std::vector<ParamSpec> specs_;
  size_t total_ = 0;
  OptimConfig config_;
  dist::Communicator* comm_ = nullptr;
  dist::Communicator* exchange_ = nullptr;
  const Backend* be_ = nullptr;
  ShardLayout shard_;
  MuonPlan muon_;
  Tensor exp_avg_, exp_avg_sq_;  // on host memory the state itself (none off the host)
  int64_t step_count_ = 0;
  // In the backend's memory (host memory: the tensors and vectors themselves).
  BackendBuffer dev_state_, dev_work_;  // [m | v] and [direction | owned] off the host
  std::vector<float> host_work_;        // [direction | owned] on the host
  float* m_ = nullptr;
  float* v_ = nullptr;
  float* direction_ = nullptr;  // Muon directions of this rank's range [shard().size()]
  float* owned_ = nullptr;      // whole matrices this rank orthogonalises [muon_.owned_floats]
  // The ops' tables: the norm's chunks, AdamW's tensors (keep set per step), Muon's pieces
  // (keep and step set per step), and the owned matrices grouped by shape for Newton–Schulz, a
  // group no larger than the workspace of the model's largest matrix (the GPU's batched
  // Newton–Schulz holds a whole group: its memory stays what the plan counts, however many
  // matrices a rank owns).
  std::vector<OptimSegment> norm_chunks_, adamw_segments_, muon_segments_;
  std::vector<bool> adamw_decays_;
  std::vector<size_t> muon_spec_;  // the spec of each Muon segment
  struct NsBatch {
    int64_t rows = 0, cols = 0;
    std::vector<float*> matrices;
  };
  std::vector<NsBatch> ns_batches_;
};

}  // namespace zaya
