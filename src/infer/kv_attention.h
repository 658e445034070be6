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

#include "core/arena.h"
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

// One query row: the sequence's local blocks and how many positions the sequence has in all.
struct KvRow {
  std::span<const int32_t> blocks;
  int64_t length;
};

struct AttentionPartials {
  float* max;  // [n, n_q]
  float* sum;  // [n, n_q]
  float* out;  // [n, n_q, d]
};

// Partials of the queries q[n, n_q·d] over this rank's positions of each row's sequence at
// attention stage `stage`, scale 1/sqrt(d), query head h reading key head h / (n_q / n_k).
// A row with no position here gets m = −inf, l = 0, o = 0.
void kv_attention_partials(const AttentionPartials& p, const float* q, std::span<const KvRow> rows,
                           KvBlockPool& pool, int stage, const KvShard& shard, const ModelConfig& c,
                           Arena& arena);

// att[n, n_q·d] from the partials of every rank of `comm` (nullptr: this rank's alone), merged in
// rank order, so every rank gets the same bits. `scratch` holds world·n·n_q·(d+2) floats (the
// all-gather's buffer).
void combine_attention_partials(float* att, const AttentionPartials& p, int n, const ModelConfig& c,
                                dist::Communicator* comm, float* scratch);

}  // namespace zaya
