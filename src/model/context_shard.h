// Context parallelism: each sequence spread over the N ranks of a context group, in the
// load-balanced causal layout. The sequence is cut into 2N chunks and rank r holds chunks r and
// 2N−1−r: an early chunk attends over few keys and a late one over many, so each rank's pair
// costs the same. Every op but attention and CCA's short convolutions is per token and runs on
// the local rows unchanged; model/ring_attention.h and model/cca_halo.h do the rest.
//
// Local rows of a sequence: the first chunk's positions, then the second's. Chunk c covers
// positions [c·S/(2N), (c+1)·S/(2N)) (integer division), so lengths differ by at most one and
// any S works; each chunk must hold at least kMinChunk positions (CCA reads 2 positions back).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "dist/communicator.h"

namespace zaya {

struct ContextShard {
  static constexpr int kMinChunk = 2;

  dist::Communicator* comm = nullptr;  // the context group; rank r of N
  int seq_len = 0;                     // S: the whole sequence

  ContextShard() = default;
  ContextShard(dist::Communicator* group, int S);

  int rank() const { return comm->rank(); }
  int size() const { return comm->world_size(); }
  int chunks() const { return 2 * size(); }
  int chunk_begin(int c) const { return int(int64_t(c) * seq_len / chunks()); }
  int chunk_len(int c) const { return chunk_begin(c + 1) - chunk_begin(c); }
  // The two chunks rank `r` holds, in local order.
  static int first_chunk(int r) { return r; }
  int second_chunk(int r) const { return chunks() - 1 - r; }
  int local_len(int r) const { return chunk_len(first_chunk(r)) + chunk_len(second_chunk(r)); }
  int local_len() const { return local_len(rank()); }
  // The chunks this rank holds (index 0: first, 1: second), their lengths and local row offsets.
  int chunk(int which) const { return which == 0 ? first_chunk(rank()) : second_chunk(rank()); }
  int len(int which) const { return chunk_len(chunk(which)); }
  int offset(int which) const { return which == 0 ? 0 : len(0); }
  // Sequence position of local row t.
  int position(int t) const;

  // The smallest sequence length N ranks can share: 2N chunks of kMinChunk positions.
  static int min_seq_len(int ranks) { return 2 * ranks * kMinChunk; }

  // This rank's rows of B sequences of S values each: [B, S] → [B, local_len()].
  template <class T>
  std::vector<T> take(std::span<const T> full, int B) const {
    std::vector<T> out;
    out.reserve(size_t(B) * size_t(local_len()));
    for (int b = 0; b < B; ++b)
      for (int which = 0; which < 2; ++which) {
        const T* row = full.data() + size_t(b) * size_t(seq_len) + chunk_begin(chunk(which));
        out.insert(out.end(), row, row + len(which));
      }
    return out;
  }
};

}  // namespace zaya
