#include "core/arena.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace zaya {

void Arena::Block::Free::operator()(std::byte* p) const {
  if (memory)
    memory->release(p);
  else
    std::free(p);
}

Arena::Block Arena::make_block(size_t bytes) const {
  bytes = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  auto* p =
      static_cast<std::byte*>(memory_ ? memory_->allocate(bytes) : std::aligned_alloc(64, bytes));
  if (p == nullptr) throw std::bad_alloc();
  return Block{std::unique_ptr<std::byte, Block::Free>(p, Block::Free{memory_}), bytes};
}

void Arena::set_memory(ArenaMemory* memory) {
  blocks_.clear();
  memory_ = memory;
  current_ = 0;
  used_ = 0;
  total_used_ = 0;
}

void* Arena::bytes(size_t n) {
  n = (n + 63) / 64 * 64;  // keep every allocation 64-byte aligned
  if (blocks_.empty()) {
    blocks_.push_back(make_block(std::max<size_t>(n, size_t(64) << 20)));
    current_ = 0;
    used_ = 0;
  }
  while (used_ + n > blocks_[current_].bytes) {
    // The next block, kept from before a rewind, or a new one at least as large as the last.
    if (current_ + 1 == blocks_.size())
      blocks_.push_back(make_block(std::max<size_t>(n, blocks_.back().bytes)));
    ++current_;
    used_ = 0;
  }
  void* p = blocks_[current_].data.get() + used_;
  used_ += n;
  total_used_ += n;
  high_water_ = std::max(high_water_, total_used_);
  step_high_water_ = std::max(step_high_water_, total_used_);
  return p;
}

void Arena::rewind(const Mark& m) {
  current_ = m.block;
  used_ = m.used;
  total_used_ = m.total;
}

float* Arena::zeros(size_t n) {
  float* p = floats(n);
  if (memory_)
    memory_->zero(p, n * sizeof(float));
  else
    std::memset(p, 0, n * sizeof(float));
  return p;
}

void Arena::reset() {
  if (blocks_.size() > 1) {
    // Merge: one block large enough for the whole of the biggest step seen so far.
    blocks_.clear();
    blocks_.push_back(make_block(high_water_));
  }
  current_ = 0;
  used_ = 0;
  total_used_ = 0;
  step_high_water_ = 0;
}

void Arena::reserve(size_t bytes) {
  if (total_used_ == 0 && capacity() < bytes) {
    blocks_.clear();  // released before the larger one is taken
    blocks_.push_back(make_block(bytes));
    current_ = 0;
    used_ = 0;
  }
}

size_t Arena::capacity() const {
  size_t c = 0;
  for (const Block& b : blocks_) c += b.bytes;
  return c;
}

}  // namespace zaya
