#include "core/arena.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace zaya {

void Arena::Block::Free::operator()(std::byte* p) const {
  std::free(p);
}

Arena::Block Arena::make_block(size_t bytes) {
  bytes = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  auto* p = static_cast<std::byte*>(std::aligned_alloc(64, bytes));
  if (p == nullptr) throw std::bad_alloc();
  return Block{std::unique_ptr<std::byte, Block::Free>(p), bytes};
}

void* Arena::bytes(size_t n) {
  n = (n + 63) / 64 * 64;  // keep every allocation 64-byte aligned
  if (blocks_.empty() || used_ + n > blocks_.back().bytes) {
    const size_t size =
        std::max<size_t>(n, blocks_.empty() ? (size_t(64) << 20) : blocks_.back().bytes);
    blocks_.push_back(make_block(size));
    used_ = 0;
  }
  void* p = blocks_.back().data.get() + used_;
  used_ += n;
  total_used_ += n;
  high_water_ = std::max(high_water_, total_used_);
  return p;
}

float* Arena::zeros(size_t n) {
  float* p = floats(n);
  std::memset(p, 0, n * sizeof(float));
  return p;
}

void Arena::reset() {
  if (blocks_.size() > 1) {
    // Merge: one block large enough for the whole of the biggest step seen so far.
    blocks_.clear();
    blocks_.push_back(make_block(high_water_));
  }
  used_ = 0;
  total_used_ = 0;
}

size_t Arena::capacity() const {
  size_t c = 0;
  for (const Block& b : blocks_) c += b.bytes;
  return c;
}

}  // namespace zaya
