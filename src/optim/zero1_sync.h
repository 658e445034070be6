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
#pragma once

#include <cstdint>
#include <vector>

#include "dist/communicator.h"
#include "optim/shard_layout.h"

namespace zaya {

class Zero1Sync {
 public:
  static constexpr int64_t kDefaultStagingFloats = int64_t(1) << 21;  // 8 MiB
  Zero1Sync(dist::Communicator& comm, int64_t total_floats,
            int64_t staging_floats = kDefaultStagingFloats);
  // Floats per rank of one bucket, for a world and a shard chunk (what the constructor picks).
  static int64_t bucket_for(int64_t staging_floats, int world, int64_t chunk);

  const ShardLayout& layout() const { return layout_; }
  // full_grads: [total] (this rank's contribution); shard_grads: [layout().size()] receives the
  // sum.
  void reduce_scatter_grads(const float* full_grads, float* shard_grads);
  // weights: [total]; this rank's range is sent, every other range is overwritten.
  void all_gather_weights(float* weights);
  // Bytes this rank sends per step in the two collectives (padded counts), for the log.
  int64_t bytes_per_step() const;
  // Floats of this rank's staging and piece buffers.
  int64_t buffer_floats() const { return int64_t(staging_.size() + piece_.size()); }

 private:
  dist::Communicator& comm_;
  ShardLayout layout_;
  int64_t bucket_;
  std::vector<float> staging_, piece_;
};

}  // namespace zaya
