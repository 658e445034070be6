// The two collectives of a ZeRO-1 step over the flat parameter buffer (ShardLayout):
//  - reduce_scatter_grads: every rank holds the gradient of its own micro-batches for the whole
//    buffer; afterwards each rank holds the sum over ranks of its shard's range only;
//  - all_gather_weights: each rank updated its shard's range; afterwards every rank holds every
//    range.
// Both run in buckets: bucket k carries elements [k·b, (k+1)·b) of every rank's range, packed
// into one staging buffer of b·world floats (the range past the parameter count is zero padding).
// b is staging_floats / world (at least 1), so the staging memory — and the communicator's
// scratch, which holds one bucket — stays at staging_floats whatever the world size and the model
// size: at 1,024 ranks a bucket is 2^21 / 1024 floats per rank, not 1,024 times a fixed slice.
// The Communicator sees equal chunks for any world size.
// Sums are the Communicator's: in rank order, so a run is bitwise reproducible at a given world
// size.
//
// The reduce-scatter can overlap the step's last backward (begin_reduce / grads_final_from /
// finish_reduce). The parameter registry lays out the embedding, then stage 0 … L−1, then the
// final tensors, and the backward finishes them from the end: when it reports that offsets
// [x, total) are final, every bucket whose rank-0 range starts at or after x is final on every
// rank (rank r's range of a bucket lies r·chunk above rank 0's) and may start moving while the
// backward goes on. kInFlight buckets move at once, each in a slot with its own staging. A
// report never blocks: it collects the buckets that have arrived (Transfer::test) and starts
// final buckets in the slots they free; the rest start in finish_reduce, which waits for all.
// The sums are the same calls on the same data as reduce_scatter_grads: bitwise the same shard.
//
// The buffers (the gradients, the shard, the weights, and the staging here) are in a backend's
// memory: the host's, or a GPU's with a communicator that moves GPU memory (NCCL). The packing
// runs as that backend's copy ops, one strided copy for the ranks whose range is whole.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "dist/communicator.h"
#include "optim/shard_layout.h"

namespace zaya {

class Zero1Sync {
 public:
  static constexpr int64_t kDefaultStagingFloats = int64_t(1) << 21;  // 8 MiB
  // memory == nullptr: the CPU backend's (host memory). gather_only: the weights' all-gather
  // alone (ZeRO-2 reduces the gradients itself), which needs one slot's buffers, not kInFlight.
  Zero1Sync(dist::Communicator& comm, int64_t total_floats,
            int64_t staging_floats = kDefaultStagingFloats, const Backend* memory = nullptr,
            bool gather_only = false);
  // Floats per rank of one bucket, for a world and a shard chunk (what the constructor picks).
  static int64_t bucket_for(int64_t staging_floats, int world, int64_t chunk);

  const ShardLayout& layout() const { return layout_; }
  // full_grads: [total] (this rank's contribution); shard_grads: [layout().size()] receives the
  // sum.
  void reduce_scatter_grads(const float* full_grads, float* shard_grads);
  // The same for gradients not kept in one fp32 buffer: source(offset, n, dst) writes the fp32
  // gradients of flat [offset, offset + n) to dst (the backend's memory;
  // ParameterPlacement::load_grads for bf16 gradients). Here and in begin_reduce the source must
  // live until the sums are done.
  using GradSource = std::function<void(int64_t offset, int64_t n, float* dst)>;
  void reduce_scatter_grads(const GradSource& source, float* shard_grads);
  // weights: [total]; this rank's range is sent, every other range is overwritten.
  void all_gather_weights(float* weights);
  // The same from the rank's range alone (shard_weights: [layout().size()]), each gathered piece
  // handed to `store` (flat offset, values in the backend's memory, count) instead of written
  // into one buffer: ParameterPlacement::store_weights for the bf16 weight storage. The pieces
  // cover every range, this rank's too, in fp32.
  using WeightSink = std::function<void(int64_t offset, const float* values, int64_t n)>;
  void all_gather_weights(const float* shard_weights, const WeightSink& store);
  // The same in about half the bytes, for weights kept in bf16 (ZayaModel's bf16 weight
  // storage): a piece of flat [offset, offset + n) travels as n bf16 values (pack rounds them)
  // plus the fp32_count(offset, n) values of the tensors kept in fp32, in fp32; store puts a
  // gathered piece in place. Each bucket carries the most fp32 values any rank's piece has; a
  // bucket where that makes the bf16 form no smaller goes as fp32 (store_fp32). The stored
  // values are those all_gather_weights would store: the owner's master rounded once.
  struct WeightCodec {
    std::function<int64_t(int64_t offset, int64_t n)> fp32_count;
    std::function<void(int64_t offset, int64_t n, const float* values, uint16_t* bf16, float* fp32)>
        pack;
    std::function<void(int64_t offset, int64_t n, const uint16_t* bf16, const float* fp32)> store;
    WeightSink store_fp32;
  };
  void all_gather_weights(const float* shard_weights, const WeightCodec& codec);
  // Bytes this rank sends per step in that all-gather and the reduce-scatter (as bytes_per_step).
  int64_t bytes_per_step(const WeightCodec& codec);
  // The overlapped reduce-scatter, for the same two buffers: begin_reduce before the last
  // backward of the step; grads_final_from(x) whenever full_grads will not change at offsets
  // [x, total) any more (ZayaModel::set_gradients_final does this per stage); finish_reduce()
  // after it starts what is left and waits for every bucket. full_grads stays untouched and
  // shard_grads unread from begin_reduce to finish_reduce.
  void begin_reduce(const float* full_grads, float* shard_grads);
  void begin_reduce(const GradSource& source, float* shard_grads);
  void grads_final_from(int64_t offset);
  void finish_reduce();
  // Buckets of the step, and how many of them the last overlapped reduce started before
  // finish_reduce (the rest had to wait for the end of the backward).
  int64_t bucket_count() const { return (layout_.chunk() + bucket_ - 1) / bucket_; }
  int64_t buckets_overlapped() const { return overlapped_; }

  // Bytes this rank sends per step in the two collectives (padded counts), for the log.
  int64_t bytes_per_step() const;
  // Floats of this rank's staging and piece buffers (every slot).
  int64_t buffer_floats() const;
  static constexpr int kInFlight = 2;  // buckets moving at once in the overlapped reduce

 private:
  // One bucket's buffers: the packed [world × bucket] send and this rank's [bucket] sum.
  struct Slot {
    BackendBuffer staging, piece;
    std::unique_ptr<dist::Transfer> transfer;
    int64_t at = -1;  // the bucket's offset within a rank's range while in flight
  };
  // The gradients the reduce reads: one buffer, or a source.
  struct GradInput {
    const float* full = nullptr;
    const GradSource* source = nullptr;
  };
  void pack(int64_t at, int64_t b, const GradInput& grads, float* staging) const;
  // weights[r·chunk + at + i] = staging[r·b + i] for every rank r and i < b inside the buffer.
  void unpack(int64_t at, int64_t b, const float* staging, float* weights) const;
  // The pieces of a gathered bucket: store(r·chunk + at, staging + r·b, n) for each rank r.
  void unpack(int64_t at, int64_t b, const float* staging, const WeightSink& store) const;
  void reduce_scatter(const GradInput& grads, float* shard_grads);
  void begin(const GradInput& grads, float* shard_grads);
  // Per bucket, the halves (2 bytes) of one rank's bf16 piece, the fp32 values included, or -1
  // where the bucket goes as fp32: fixed by the layout, worked out once (the first codec's).
  const std::vector<int64_t>& bucket_halves(const WeightCodec& codec);
  std::vector<int64_t> bucket_halves_;
  // fn(r, offset, n) for each rank r whose range has elements in bucket `at` (b per rank): its
  // flat [offset, offset + n).
  void for_each_piece(int64_t at, int64_t b,
                      const std::function<void(int r, int64_t offset, int64_t n)>& fn) const;
  // Bucket `at` of every rank's range gathered in fp32: the staging, rank r's piece at r·b.
  const float* gather_bucket(int64_t at, int64_t b, const float* shard_weights);
  // The all-gather's buckets of the rank's range, each handed to unpack_bucket(at, b, staging).
  void gather(const float* shard_weights,
              const std::function<void(int64_t, int64_t, const float*)>& unpack_bucket);
  // Starts the final buckets (next_at_ >= final_from_) while the oldest slot is free or its
  // bucket has arrived; with `block`, waits for the oldest instead.
  void start_final_buckets(bool block);
  void complete(Slot& slot);

  dist::Communicator& comm_;
  const Backend* be_;
  ShardLayout layout_;
  int64_t bucket_;
  Slot slots_[kInFlight];
  // The overlapped reduce in progress.
  bool reducing_ = false;
  bool gather_only_ = false;
  GradInput input_;
  GradSource source_;  // begin_reduce's source, held until finish_reduce
  float* shard_ = nullptr;
  int64_t next_at_ = -1;    // the next bucket to start (they start from the last one down)
  int64_t final_from_ = 0;  // the gradient is final at flat offsets >= this
  int next_slot_ = 0;       // slots are used round robin: the oldest bucket is in next_slot_
  int64_t overlapped_ = 0;
};

}  // namespace zaya
