// Arena: the activations of one training step come from here. Allocation is a pointer bump;
// reset() frees everything at once. If a step needs more than the current block, further blocks are
// chained (earlier pointers stay valid) and the next reset() merges them into one block, so from
// the second step on every step runs out of a single allocation.
// mark() and rewind() free everything taken after a mark, for buffers that live within one
// stage of the backward (the space is reused; the blocks stay).
// Blocks are not zero-filled (floats() promises nothing about the contents; zeros() fills what it
// hands out), so only the bytes a step uses become resident: the process's memory grows by the
// high-water mark, not by the block sizes (train/train_memory.h counts on this).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace zaya {

// Where an arena's blocks live: host memory unless an arena is given another (a GPU backend's
// device memory, model/zaya_model.cpp).
class ArenaMemory {
 public:
  virtual ~ArenaMemory() = default;
  virtual void* allocate(size_t bytes) = 0;  // at least 64-byte aligned
  virtual void release(void* p) noexcept = 0;
  virtual void zero(void* p, size_t bytes) = 0;
};

class Arena {
 public:
  Arena() = default;
  // Blocks from `memory` from now on (nullptr: host memory); drops the current blocks, so no
  // pointer handed out before stays valid. `memory` must outlive the arena's blocks.
  void set_memory(ArenaMemory* memory);
  float* floats(size_t n) { return static_cast<float*>(bytes(n * sizeof(float))); }
  int32_t* ints(size_t n) { return static_cast<int32_t*>(bytes(n * sizeof(int32_t))); }
  // Zero-filled variant, for gradient accumulators.
  float* zeros(size_t n);
  void* bytes(size_t n);
  void reset();
  // Between steps (nothing handed out): makes the blocks one of at least `bytes`, so that a step
  // of up to that many takes no other allocation (a device's memory is then held at the size
  // planned, not grown block by block).
  void reserve(size_t bytes);
  struct Mark {
    size_t block = 0, used = 0, total = 0;
  };
  Mark mark() const { return {current_, used_, total_used_}; }
  // Frees every allocation made since `m` (their pointers become invalid).
  void rewind(const Mark& m);
  size_t capacity() const;
  size_t high_water() const { return high_water_; }            // the most any step has used
  size_t step_high_water() const { return step_high_water_; }  // the most since reset()

 private:
  struct Block {
    struct Free {
      ArenaMemory* memory = nullptr;
      void operator()(std::byte* p) const;
    };
    std::unique_ptr<std::byte, Free> data;
    size_t bytes = 0;
  };
  Block make_block(size_t bytes) const;
  ArenaMemory* memory_ = nullptr;
  std::vector<Block> blocks_;
  size_t current_ = 0;     // the block allocations come from (blocks after it are free)
  size_t used_ = 0;        // bytes used in the current block
  size_t total_used_ = 0;  // bytes used in all blocks this step
  size_t high_water_ = 0;
  size_t step_high_water_ = 0;
};

}  // namespace zaya
