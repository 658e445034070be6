#include "infer/kv_blocks.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace zaya {

KvBlockPool::KvBlockPool(const Backend& be, int stages, int kv_dim, int block_size, int64_t blocks)
    : stages_(stages), kv_dim_(kv_dim), block_size_(block_size), total_(blocks) {
  ZAYA_CHECK(stages >= 0 && kv_dim > 0 && block_size > 0 && blocks >= 0, "KvBlockPool: stages ",
             stages, ", kv_dim ", kv_dim, ", block_size ", block_size, ", blocks ", blocks);
  ZAYA_CHECK(blocks <= std::numeric_limits<int32_t>::max(), "KvBlockPool: ", blocks,
             " blocks are more than block ids can name");
  const double floats = double(blocks) * stages * 2 * block_size * kv_dim;
  ZAYA_CHECK(floats < 9e15, "KvBlockPool: ", floats, " floats do not fit in memory");
  mem_ = BackendBuffer(be, size_t(floats) * sizeof(float));
  if (mem_.bytes()) be.fill_zero(mem_.get(), mem_.bytes());
  free_.resize(size_t(blocks));
  for (int64_t i = 0; i < blocks; ++i) free_[size_t(i)] = int32_t(blocks - 1 - i);
  taken_.assign(size_t(blocks), 0);
}

std::vector<int32_t> KvBlockPool::allocate(int64_t n) {
  ZAYA_CHECK(n >= 0 && n <= free_blocks(), "KvBlockPool: ", n, " blocks asked, ", free_blocks(),
             " of ", total_, " free");
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (auto& b : out) {
    b = free_.back();
    free_.pop_back();
    taken_[size_t(b)] = 1;
  }
  return out;
}

void KvBlockPool::release(std::span<const int32_t> blocks) {
  for (const int32_t b : blocks) {
    ZAYA_CHECK(b >= 0 && b < total_ && taken_[size_t(b)], "KvBlockPool: block ", b,
               " released but not taken");
    taken_[size_t(b)] = 0;
    free_.push_back(b);
  }
  // Keep the lowest ids on top, so allocation order does not depend on the order of releases.
  std::sort(free_.begin(), free_.end(), std::greater<int32_t>());
}

}  // namespace zaya
