#include "optim/zero1_sync.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace zaya {

int64_t Zero1Sync::bucket_for(int64_t staging_floats, int world, int64_t chunk) {
  return std::max<int64_t>(1, std::min(staging_floats / std::max(world, 1), chunk));
}

Zero1Sync::Zero1Sync(dist::Communicator& comm, int64_t total_floats, int64_t staging_floats)
    : comm_(comm), layout_{total_floats, comm.world_size(), comm.rank()} {
  ZAYA_CHECK(staging_floats > 0, "Zero1Sync: the staging size must be > 0 floats, got ",
             staging_floats);
  bucket_ = bucket_for(staging_floats, layout_.world, layout_.chunk());
  staging_.resize(size_t(bucket_ * layout_.world));
  piece_.resize(size_t(bucket_));
}

void Zero1Sync::reduce_scatter_grads(const float* full_grads, float* shard_grads) {
  const int64_t chunk = layout_.chunk(), total = layout_.total;
  for (int64_t at = 0; at < chunk; at += bucket_) {
    const int64_t b = std::min(bucket_, chunk - at);
    for (int r = 0; r < layout_.world; ++r) {
      const int64_t src = int64_t(r) * chunk + at;
      const int64_t n = std::clamp<int64_t>(total - src, 0, b);
      float* dst = staging_.data() + size_t(r) * size_t(b);
      if (n > 0) std::memcpy(dst, full_grads + src, size_t(n) * sizeof(float));
      std::fill(dst + n, dst + b, 0.0f);
    }
    comm_.reduce_scatter(staging_.data(), piece_.data(), size_t(b), DType::F32,
                         dist::ReduceOp::Sum);
    const int64_t keep = std::clamp<int64_t>(layout_.size() - at, 0, b);
    std::memcpy(shard_grads + at, piece_.data(), size_t(keep) * sizeof(float));
  }
}

void Zero1Sync::all_gather_weights(float* weights) {
  const int64_t chunk = layout_.chunk(), total = layout_.total;
  for (int64_t at = 0; at < chunk; at += bucket_) {
    const int64_t b = std::min(bucket_, chunk - at);
    const int64_t mine = std::clamp<int64_t>(layout_.size() - at, 0, b);
    if (mine > 0)
      std::memcpy(piece_.data(), weights + layout_.begin() + at, size_t(mine) * sizeof(float));
    std::fill(piece_.begin() + mine, piece_.begin() + b, 0.0f);
    comm_.all_gather(piece_.data(), staging_.data(), size_t(b), DType::F32);
    for (int r = 0; r < layout_.world; ++r) {
      if (r == layout_.rank) continue;
      const int64_t dst = int64_t(r) * chunk + at;
      const int64_t n = std::clamp<int64_t>(total - dst, 0, b);
      if (n > 0)
        std::memcpy(weights + dst, staging_.data() + size_t(r) * size_t(b),
                    size_t(n) * sizeof(float));
    }
  }
}

int64_t Zero1Sync::bytes_per_step() const {
  // reduce-scatter sends (world−1)/world of the padded buffer, all-gather the same again.
  const int64_t padded = layout_.padded();
  return 2 * padded * 4 * (layout_.world - 1) / std::max(layout_.world, 1);
}

}  // namespace zaya
