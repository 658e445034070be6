// The key/value memory of a decoder: one preallocated pool of fixed-size blocks that sequences
// take as they join and give back as they leave (paged, as vLLM's block tables), so continuous
// batching never allocates or copies cache memory and a finished sequence's memory serves the next.
//
// A block holds `block_size` consecutive positions of one sequence, for every attention stage:
// keys and values of n_k·d floats each. With the cache sharded over ranks (tree attention), the
// positions of logical block j of a sequence live on rank j mod world, in that rank's pool.
// The pool is in the memory of the backend the model computes on (backend/backend.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"

namespace zaya {

class KvBlockPool {
 public:
  // `blocks` blocks of `block_size` positions × `stages` attention stages × `kv_dim` floats for the
  // keys and as many for the values, allocated (and zeroed) here once in `be`'s memory.
  KvBlockPool(const Backend& be, int stages, int kv_dim, int block_size, int64_t blocks);

  int block_size() const { return block_size_; }
  int64_t total_blocks() const { return total_; }
  int64_t free_blocks() const { return int64_t(free_.size()); }
  int64_t bytes() const { return int64_t(mem_.bytes()); }

  // Takes n free blocks (lowest ids first); throws when fewer are free.
  std::vector<int32_t> allocate(int64_t n);
  // Gives blocks back; a block given back twice or never taken is an error.
  void release(std::span<const int32_t> blocks);

  // [block_size, kv_dim] keys / values of `block` at attention stage `stage` (backend memory).
  float* keys(int32_t block, int stage) { return mem_.floats() + offset(block, stage); }
  float* values(int32_t block, int stage) {
    return mem_.floats() + offset(block, stage) + size_t(block_size_) * kv_dim_;
  }
  // Stage `stage`'s cache as the paged attention reads it (PagedKv's keys and strides; the block
  // tables are the caller's).
  PagedKv paged(int stage) const {
    PagedKv kv;
    kv.keys = mem_.floats() + offset(0, stage);
    kv.block_stride = int64_t(offset(1, 0));
    kv.values_offset = int64_t(block_size_) * kv_dim_;
    kv.block_size = block_size_;
    return kv;
  }
  // Where position `row` (< block_size) of `block` at `stage` keeps its key, counted in kv_dim
  // rows from keys(0, stage); its value is block_size rows further.
  int64_t key_row(int32_t block, int row) const {
    return int64_t(offset(block, 0)) / kv_dim_ + row;
  }

 private:
  size_t offset(int32_t block, int stage) const {
    return (size_t(block) * stages_ + size_t(stage)) * 2 * size_t(block_size_) * kv_dim_;
  }
  int stages_, kv_dim_, block_size_;
  int64_t total_;
  BackendBuffer mem_;
  std::vector<int32_t> free_;  // a stack: the lowest free id on top
  std::vector<char> taken_;
};

}  // namespace zaya
