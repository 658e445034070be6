// ZeRO-2's gradient reduce (docs/memory.md): ZeRO-1's partition (ShardLayout) and sums, but each
// rank's range moves to its owner alone (Communicator::start_reduce) as soon as the backward has
// finished it, and the gradient memory of what has moved is given back on every rank (`release`:
// ParameterPlacement::decommit_grads). The backward finishes the flat buffer from its end
// (ZayaModel::set_gradients_final), so the buckets go in descending offsets: range W−1's from its
// end down, then range W−2's, … Each report first finishes what the previous one made final, so a
// rank holds the gradients of the stage the backward is writing, of the stage before it (moving
// meanwhile), and of the tensors outside the stages (the embedding's: the tied LM head adds into
// it first, at offset 0, and it is final last) — never the whole gradient.
//
// An owner's sum is the reduce-scatter's: the same contributions in rank order, so with one
// micro-batch per rank per step the shard is bitwise ZeRO-1's. With several, each micro-batch's
// backward is reduced on its own and the owner adds them in micro-batch order (as DeepSpeed's
// stage 2 does); ZeRO-1 adds a rank's micro-batches first, so the two agree to fp32 rounding
// there, not bitwise.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "dist/communicator.h"
#include "optim/shard_layout.h"
#include "optim/zero1_sync.h"

namespace zaya {

class Zero2Reduce {
 public:
  using GradSource = Zero1Sync::GradSource;
  // release(offset, n): flat [offset, offset + n) has moved; its gradients are not read again
  // this backward.
  using Release = std::function<void(int64_t offset, int64_t n)>;
  // Buckets of at most Zero1Sync::bucket_for(staging_floats, world, chunk) floats, so that an
  // owner receives at most staging_floats per bucket, as ZeRO-1's staging holds. memory ==
  // nullptr: the CPU backend's.
  // from_source: the gradients come through a GradSource (bf16 gradients), which needs a
  // buffer per bucket in flight to send from; fp32 ones are sent where they lie.
  Zero2Reduce(dist::Communicator& comm, int64_t total_floats,
              int64_t staging_floats = Zero1Sync::kDefaultStagingFloats,
              const Backend* memory = nullptr, bool from_source = false);
  Zero2Reduce(const Zero2Reduce&) = delete;
  Zero2Reduce& operator=(const Zero2Reduce&) = delete;

  const ShardLayout& layout() const { return layout_; }
  // One backward's reduce into shard_grads ([layout().size()], the backend's memory): begin
  // before the backward, grads_final_from(x) whenever the gradients at flat [x, total) will not
  // change any more, finish() after it (starts what is left, waits for every bucket). accumulate:
  // add the sums into shard_grads (a later micro-batch of the step) instead of writing them.
  // full_grads (or the source) must stay valid until finish; shard_grads is unread until then.
  void begin(const float* full_grads, float* shard_grads, bool accumulate, Release release);
  void begin(const GradSource& source, float* shard_grads, bool accumulate, Release release);
  void grads_final_from(int64_t offset);
  void finish();

  int64_t bucket_count() const { return int64_t(buckets_.size()); }
  // Buckets the last reduce started before finish (the rest waited for the end of the backward).
  int64_t buckets_overlapped() const { return overlapped_; }
  // Bytes this rank sends per reduce (one micro-batch's): every gradient outside its range.
  int64_t bytes_per_reduce() const { return 4 * (layout_.total - layout_.size()); }
  // Floats of the slots' buffers (each in flight: one bucket to send, one received sum), and what
  // an owner's communicator receives per bucket in flight (its world contributions).
  int64_t buffer_floats() const;
  static constexpr int kInFlight = 2;

 private:
  struct Bucket {
    int64_t offset = 0, n = 0;  // flat [offset, offset + n), inside the owner's range
    int owner = 0;
  };
  struct Slot {
    BackendBuffer send, sum;  // the bucket from a source, the owner's sum when accumulating
    std::unique_ptr<dist::Transfer> transfer;
    int64_t bucket = -1;
  };
  void begin(const float* full_grads, const GradSource* source, float* shard_grads, bool accumulate,
             Release release);
  // Starts the final buckets while the oldest slot is free or its bucket has arrived; with
  // `block`, waits for the oldest instead.
  void start_final_buckets(bool block);
  // Starts every bucket at or above `offset` (all final) and completes them.
  void drain_from(int64_t offset);
  void complete(Slot& slot);

  dist::Communicator& comm_;
  const Backend* be_;
  ShardLayout layout_;
  std::vector<Bucket> buckets_;  // descending offsets
  Slot slots_[kInFlight];
  // The reduce in progress.
  bool reducing_ = false;
  const float* full_ = nullptr;
  GradSource source_;
  float* shard_ = nullptr;
  bool accumulate_ = false;
  Release release_;
  size_t next_ = 0;         // the next bucket to start
  int64_t final_from_ = 0;  // the gradient is final at flat offsets >= this
  int next_slot_ = 0;       // round robin: the oldest bucket in flight is in next_slot_
  int64_t overlapped_ = 0;
};

}  // namespace zaya
