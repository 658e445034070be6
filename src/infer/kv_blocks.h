// The key/value memory of a decoder: one preallocated pool of fixed-size blocks that sequences
// take as they join and give back as they leave (paged, as vLLM's block tables), so continuous
// batching never allocates or copies cache memory and a finished sequence's memory serves the next.
//
// A block holds `block_size` consecutive positions of one sequence, for every attention stage:
// keys and values of n_k·d floats each. With the cache sharded over ranks (tree attention), the
// positions of logical block j of a sequence live on rank j mod world, in that rank's pool.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace zaya {

class KvBlockPool {
 public:
  // `blocks` blocks of `block_size` positions × `stages` attention stages × `kv_dim` floats for the
  // keys and as many for the values, allocated (and touched) here once.
  KvBlockPool(int stages, int kv_dim, int block_size, int64_t blocks);

  int block_size() const { return block_size_; }
  int64_t total_blocks() const { return total_; }
  int64_t free_blocks() const { return int64_t(free_.size()); }
  int64_t bytes() const { return int64_t(mem_.size()) * 4; }

  // Takes n free blocks (lowest ids first); throws when fewer are free.
  std::vector<int32_t> allocate(int64_t n);
  // Gives blocks back; a block given back twice or never taken is an error.
  void release(std::span<const int32_t> blocks);

  // [block_size, kv_dim] keys / values of `block` at attention stage `stage`.
  float* keys(int32_t block, int stage) { return mem_.data() + offset(block, stage); }
  float* values(int32_t block, int stage) {
    return mem_.data() + offset(block, stage) + size_t(block_size_) * kv_dim_;
  }

 private:
  size_t offset(int32_t block, int stage) const {
    return (size_t(block) * stages_ + size_t(stage)) * 2 * size_t(block_size_) * kv_dim_;
  }
  int stages_, kv_dim_, block_size_;
  int64_t total_;
  std::vector<float> mem_;
  std::vector<int32_t> free_;  // a stack: the lowest free id on top
  std::vector<char> taken_;
};

}  // namespace zaya
