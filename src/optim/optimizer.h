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
// Muon's Newton–Schulz, which needs the whole matrix. A Muon matrix that straddles shard
// boundaries is orthogonalised by the rank holding its largest piece: the other ranks compute
// the momentum and Nesterov direction of their own piece, send that piece to the owner, and get
// the orthogonalised piece back (the ZAYA1 paper's neighbour exchange: only boundary-split
// matrices move, 2 × 4 bytes per element not on the owner, per step). Every other matrix is
// handled by the rank that holds it whole, so Newton–Schulz work is spread over the ranks.
// With clipping off the result is bitwise that of one process; with clipping the norm's
// summation order differs by world size (relative differences ~1e-7).
// Elementwise work is parallel with OpenMP (order-independent); reductions use fixed partitions
// and the Muon matrices run one after another, so a step is bitwise reproducible.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/params.h"
#include "optim/newton_schulz.h"
#include "optim/optim_config.h"
#include "optim/shard_layout.h"

namespace zaya {

namespace dist {
class Communicator;
}

class Optimizer {
 public:
  // comm == nullptr (or a one-rank communicator): the whole buffer is this process's shard.
  Optimizer(const ParamRegistry& registry, const OptimConfig& config,
            dist::Communicator* comm = nullptr);
  // Any layout of specs (offset, numel, shape, group) over a flat buffer of total_floats.
  Optimizer(std::vector<ParamSpec> specs, size_t total_floats, const OptimConfig& config,
            dist::Communicator* comm = nullptr);

  // One update with learning rate `lr`; returns the global gradient norm before clipping. When
  // that norm is not finite the weights and state are left untouched (the caller decides).
  // `weights` is the whole flat buffer (only the shard's range is written); `shard_grads` holds
  // the summed gradients of the shard's range, shard_grads[0] being flat element shard().begin()
  // (with one process: the whole gradient buffer). Clipping scales shard_grads in place.
  float step(ParamStore& store, double lr);  // one process only
  float step(float* weights, float* shard_grads, double lr);

  // Checkpointing: the shard's state ("exp_avg", "exp_avg_sq", each [shard().size()], element 0
  // at flat offset shard().begin()) and the number of steps taken (AdamW's bias-correction t).
  std::map<std::string, Tensor> state_tensors() const;
  int64_t step_count() const { return step_count_; }
  // Copies state from whole-buffer tensors ([total_floats], e.g. assembled from a checkpoint of
  // any world size): this rank keeps its range. Names and sizes must match.
  void load_state(const std::map<std::string, Tensor>& state, int64_t step_count);

  const OptimConfig& config() const { return config_; }
  const ShardLayout& shard() const { return shard_; }
  // Bytes this rank sends + receives per step for boundary-split Muon matrices.
  int64_t muon_exchange_bytes() const { return muon_exchange_bytes_; }

 private:
  // The part [begin, end) of tensor p inside this rank's shard (empty: begin == end).
  struct Piece {
    int64_t begin, end;
  };
  Piece piece(const ParamSpec& p, int rank) const;
  double grad_norm(const float* shard_grads) const;
  void adamw_update(const ParamSpec& p, float* weights, const float* shard_grads, double lr);
  void muon_update(const ParamSpec& p, float* weights, const float* shard_grads, double lr);
  // Newton–Schulz on direction_ for a matrix split over several ranks (see the header comment).
  void orthogonalise_split(const ParamSpec& p);
  int muon_owner(const ParamSpec& p) const;

  std::vector<ParamSpec> specs_;
  size_t total_ = 0;
  OptimConfig config_;
  dist::Communicator* comm_ = nullptr;
  ShardLayout shard_;
  int64_t muon_exchange_bytes_ = 0;
  Tensor exp_avg_, exp_avg_sq_;
  int64_t step_count_ = 0;
  std::vector<float> direction_;  // Muon scratch: the whole matrix handed to Newton–Schulz
  NsWorkspace ns_;
};

}  // namespace zaya
