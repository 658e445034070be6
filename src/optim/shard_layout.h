// The ZeRO-1 partition of the flat parameter buffer (ParamRegistry layout, `total` floats) over
// `world` ranks: every rank owns one contiguous range of `chunk` = ceil(total / world) floats,
// rank r the range [r·chunk, min((r+1)·chunk, total)). The last ranges may be short or empty:
// the buffers that collectives see are padded to chunk·world, so any world size works for any
// parameter count. Optimizer state, gradient reduce-scatter, parameter all-gather and
// checkpoint rank files all use this one partition.
#pragma once

#include <algorithm>
#include <cstdint>

namespace zaya {

struct ShardLayout {
  int64_t total = 0;
  int world = 1;
  int rank = 0;

  int64_t chunk() const { return world <= 1 ? total : (total + world - 1) / world; }
  int64_t padded() const { return chunk() * world; }
  int64_t begin_of(int r) const { return std::min<int64_t>(total, int64_t(r) * chunk()); }
  int64_t end_of(int r) const { return std::min<int64_t>(total, int64_t(r + 1) * chunk()); }
  int64_t begin() const { return begin_of(rank); }
  int64_t end() const { return end_of(rank); }
  int64_t size() const { return end() - begin(); }
  // The rank owning flat element i (0 <= i < total).
  int owner_of(int64_t i) const { return chunk() == 0 ? 0 : int(i / chunk()); }
};

}  // namespace zaya
