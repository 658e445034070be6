// Attention of decode queries over cached keys and values, as partial results that combine
// exactly across shards of the cache: tree attention (Shyam et al. 2024, as Zyphra decodes long
// contexts). Each rank attends over the positions it holds and keeps, per query head,
//   m = max score,  l = Σ exp(score − m),  o = Σ exp(score − m) · v;
// the shards then merge by the associative rule  M = max m_r,  L = Σ l_r·e^(m_r−M),
// O = Σ o_r·e^(m_r−M),  attention = O / L  — the softmax over all positions, without any rank
// seeing another's keys. One rank holding everything is the degenerate case (attention = o / l).
#pragma once

#include <cstdint>
#include <span>

#include "backend/backend.h"
#include "dist/communicator.h"
#include "infer/kv_blocks.h"
#include "model/config.h"

namespace zaya {

// Which positions of a sequence this rank holds: logical block j (positions j·B .. j·B+B−1) lives
// on rank j mod world as that rank's local block j / world.
struct KvShard {
  int rank = 0, world = 1;
  bool holds(int64_t position, int block_size) const {
    return (position / block_size) % world == rank;
  }
  // Which of this rank's blocks of a sequence holds `position` (one it holds).
  size_t local_index(int64_t position, int block_size) const {
    return size_t(position / block_size / world);
  }
  // The first position of this rank's block `local` of a sequence.
  int64_t first_position(size_t local, int block_size) const {
    return (int64_t(local) * world + rank) * block_size;
  }
  // Local blocks a sequence of `positions` positions needs on this rank.
  int64_t local_blocks(int64_t positions, int block_size) const {
    const int64_t logical = (positions + block_size - 1) / block_size;
    return logical > rank ? (logical - rank + world - 1) / world : 0;
  }
};

// Row r's block table for the paged attention (PagedKv, backend/op_types.h): this rank's blocks
// of a sequence of `length` positions whose local blocks are `seq_blocks`, and how many positions
// each holds, into blocks[0, max_blocks) and counts[0, max_blocks) (counts 0 after the last).
void kv_block_table(int32_t* blocks, int32_t* counts, int max_blocks,
                    std::span<const int32_t> seq_blocks, int64_t length, const KvShard& shard,
                    int block_size);

struct AttentionPartials {
  float* max;  // [n, n_q]
  float* sum;  // [n, n_q]
  float* out;  // [n, n_q, d]
};

// The partials of the queries q[n, n_q·d] over the positions of the rows' block tables
// (Backend::kv_attention_partials, backend/cpu/decode_ops.h): scale 1/sqrt(d), query head h
// reading key head h / (n_q / n_k); a row with no position here gets m = −inf, l = 0, o = 0.
// `scores` holds n·n_q·max_blocks·block_size floats; all in the backend's memory.
void kv_attention_partials(const Backend& be, const AttentionPartials& p, float* scores,
                           const float* q, const PagedKv& kv, int n, const ModelConfig& c);

// att[n, n_q·d] from the partials of every rank of `comm` (nullptr: this rank's alone, on the
// backend), merged in rank order, so every rank gets the same bits. With several ranks the
// partials are host memory (a host-memory backend) and `scratch` holds world·n·n_q·(d+2) floats
// (the all-gather's buffer).
void combine_attention_partials(const Backend& be, float* att, const AttentionPartials& p, int n,
                                const ModelConfig& c, dist::Communicator* comm, float* scratch);

}  // namespace zaya
