// The two collectives of a ZeRO-1 step over the flat parameter buffer (ShardLayout):
//  - reduce_scatter_grads: every rank holds the gradient of its own micro-batches for the whole
//    buffer; afterwards each rank holds the sum over ranks of its shard's range only;
//  - all_gather_weights: each rank updated its shard's range; afterwards every rank holds every
//    range.
// Both run in buckets of `bucket_floats` elements per rank: bucket k carries elements
// [k·b, (k+1)·b) of every rank's range, packed into one staging buffer of b·world floats (the
// range past the parameter count is zero padding). The staging memory is bounded by the bucket
// size whatever the model size, and the Communicator sees equal chunks for any world size.
// Sums are the Communicator's: in rank order, so a run is bitwise reproducible at a given world
// size.
#pragma once

#include <cstdint>
#include <vector>

#include "dist/communicator.h"
#include "optim/shard_layout.h"

namespace zaya {

class Zero1Sync {
 public:
  Zero1Sync(dist::Communicator& comm, int64_t total_floats, int64_t bucket_floats = 1 << 20);

  const ShardLayout& layout() const { return layout_; }
  // full_grads: [total] (this rank's contribution); shard_grads: [layout().size()] receives the
  // sum.
  void reduce_scatter_grads(const float* full_grads, float* shard_grads);
  // weights: [total]; this rank's range is sent, every other range is overwritten.
  void all_gather_weights(float* weights);
  // Bytes this rank sends per step in the two collectives (padded counts), for the log.
  int64_t bytes_per_step() const;

 private:
  dist::Communicator& comm_;
  ShardLayout layout_;
  int64_t bucket_;
  std::vector<float> staging_, piece_;
};

}  // namespace zaya
