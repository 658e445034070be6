// One update of a model's parameters from the gradients of a step, for every way the parameters
// can be kept (model/parameter_placement.h): the gradients' reduce-scatter over the data ranks
// (ZeRO-1, optionally overlapping the backward), AdamW + Muon on this rank's range, and the
// all-gather of the new weights (in bf16 where the weights are stored in bf16).
//
//   weights      gradients   ranks   what a step does
//   fp32         fp32        1       optimizer on the whole buffer
//   fp32         fp32        > 1     reduce-scatter, optimizer on the range, all-gather
//   bf16+master  fp32/bf16   1       (bf16: widen every gradient) optimizer on the master, store
//   bf16+master  fp32/bf16   > 1     reduce-scatter, optimizer on the master, bf16 all-gather
//
// `zaya train` and `zaya bench step --optimizer` both step through this object.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "model/parameter_placement.h"
#include "optim/bf16_weight_codec.h"
#include "optim/master_weights.h"
#include "optim/optim_config.h"
#include "optim/optimizer.h"
#include "optim/zero1_sync.h"
#include "optim/zero2_reduce.h"

namespace zaya {

class ParameterUpdate {
 public:
  // comm: the host communicator of the ranks that share the parameters (nullptr: one rank).
  // data_comm: the one ZeRO-1's buckets and the Muon pieces move over, in the backend's memory
  // (nullptr: comm). With bf16 weight storage it keeps the fp32 master weights of this rank's
  // ZeRO-1 range (optim/master_weights.h), loaded from the host copy now.
  // zero_stage 2 (several ranks): ZeRO-2, the gradients sharded too (optim/zero2_reduce.h): the
  // placement keeps them on demand and every backward is reduced as it runs
  // (begin_backward_reduce); the weights' all-gather stays ZeRO-1's.
  ParameterUpdate(ParameterPlacement& placement, const OptimConfig& config,
                  dist::Communicator* comm = nullptr, dist::Communicator* data_comm = nullptr,
                  int64_t bucket_floats = Zero1Sync::kDefaultStagingFloats, int zero_stage = 1);
  ParameterUpdate(const ParameterUpdate&) = delete;
  ParameterUpdate& operator=(const ParameterUpdate&) = delete;

  Optimizer& optimizer() { return optimizer_; }
  const Zero1Sync* zero1() const { return zero1_.get(); }

  // The overlapped reduce-scatter (several ranks): call before the last micro-batch's backward
  // and give the model the returned function (ZayaModel::set_gradients_final); ZeRO-1's buckets
  // start as the backward finishes them. reduce_gradients() then waits for the rest.
  std::function<void(int64_t)> begin_overlapped_reduce();
  // The summed gradients of this rank's range (several ranks; one rank, or ZeRO-2 where each
  // backward's reduce did it: nothing to do). Returns the seconds this rank waited for them.
  double reduce_gradients();
  // ZeRO-2: every backward's gradients move to their owners while it runs. Call before each
  // backward of the step (first_of_step: the first, whose sums are written, not added) and give
  // the model the returned function (ZayaModel::set_gradients_final; or not, to reduce after the
  // backward); finish_backward_reduce after it returns the seconds it waited.
  bool reduces_each_backward() const { return zero2_ != nullptr; }
  std::function<void(int64_t)> begin_backward_reduce(bool first_of_step);
  double finish_backward_reduce();
  // Every gradient the step's update will read = value (the trainer's NaN drill): the
  // placement's, or with ZeRO-2 the reduced range's.
  void fill_gradients(float value);
  // The optimizer's step at learning rate lr on the reduced gradients, and the new weights
  // gathered to every rank. Returns the global gradient norm before clipping.
  double step(double lr);
  // The host copy's weights of flat [offset, offset + n) into the backend's memory: the model's
  // (ParameterPlacement::push_weights) and the master weights' part of the range.
  void push_weights(size_t offset, size_t n);
  // The master weights from the host copy again (after a resume restored it).
  void load_master_weights();
  // The backend's weights into the host copy: the model's, then the master range exactly (the
  // host copy checkpoints are written from).
  void pull_weights();
  // At the end of a run with bf16 weight storage at several ranks: the master weights of every
  // rank's range into the host copy (which held only this rank's master values).
  void gather_master_weights_to_host();
  // Bytes of the master weights in the backend's memory (0 without bf16 weight storage).
  size_t master_bytes() const { return master_.bytes(); }
  // Bytes this rank sends per step in the reduce-scatter and the all-gather.
  int64_t bytes_per_step();
  // One line for the run's header: the ZeRO-1 shard, the bytes each step sends and the buckets
  // ("" without ZeRO-1).
  std::string zero1_summary(bool overlap_reduce);

 private:
  ParameterPlacement& placement_;
  const Backend& be_;
  Optimizer optimizer_;
  std::unique_ptr<Zero1Sync> zero1_;
  std::unique_ptr<Zero2Reduce> zero2_;  // ZeRO-2's reduce (zero1_ still gathers the weights)
  int64_t released_from_ = 0;           // ZeRO-2: the gradients at flat >= this are given back
  BackendBuffer shard_grads_;  // this rank's summed range (or every gradient widened to fp32)
  bool overlapped_ = false;    // begin_overlapped_reduce ran this step
  Zero1Sync::GradSource grad_source_;
  // With bf16 weight storage: the master weights of the optimizer's range, and the bf16
  // all-gather's codec.
  MasterWeights master_;
  std::unique_ptr<Bf16WeightCodec> bf16_codec_;
  Zero1Sync::WeightCodec codec_;
};

}  // namespace zaya
