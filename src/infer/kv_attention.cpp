#include "infer/kv_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/fast_exp.h"

namespace zaya {

void kv_attention_partials(const AttentionPartials& p, const float* q, std::span<const KvRow> rows,
                           KvBlockPool& pool, int stage, const KvShard& shard, const ModelConfig& c,
                           Arena& arena) {
  const int d = int(c.head_dim), nq = int(c.num_q_heads), nk = int(c.num_kv_heads);
  const int g = nq / nk, Dk = nk * d, Dq = nq * d, bs = pool.block_size();
  const int n = int(rows.size());
  const float scale = float(1.0 / std::sqrt(double(d)));
  // The scores of one (row, head) item: at most its row's blocks × block size.
  size_t stride = 1;
  for (const KvRow& row : rows) stride = std::max(stride, row.blocks.size() * size_t(bs));
  float* scores = arena.floats(size_t(n) * nq * stride);
  // The positions this rank holds of a row, in position order: fn(block, positions in it).
  const auto for_each_held = [&](const KvRow& row, auto&& fn) {
    for (size_t i = 0; i < row.blocks.size(); ++i) {
      const int count = int(std::min<int64_t>(bs, row.length - shard.first_position(i, bs)));
      if (count <= 0) break;
      fn(row.blocks[i], count);
    }
  };
  // One (row, query head) per work item: each is computed by the same code whatever the batch.
#pragma omp parallel for schedule(dynamic, 1)
  for (int item = 0; item < n * nq; ++item) {
    const int r = item / nq, h = item % nq, j = h / g;
    const KvRow& row = rows[size_t(r)];
    const float* qh = q + size_t(r) * Dq + size_t(h) * d;
    float* o = p.out + size_t(item) * d;
    std::fill(o, o + d, 0.0f);
    // Scores of every held position, in position order, then max, exponentials and the sum.
    float* score = scores + size_t(item) * stride;
    size_t held = 0;
    for_each_held(row, [&](int32_t block, int count) {
      const float* keys = pool.keys(block, stage);
      for (int s = 0; s < count; ++s) {
        const float* k = keys + size_t(s) * Dk + size_t(j) * d;
        float dot = 0.0f;
        for (int x = 0; x < d; ++x) dot += qh[x] * k[x];
        score[held++] = dot * scale;
      }
    });
    if (held == 0) {
      p.max[item] = -INFINITY;
      p.sum[item] = 0.0f;
      continue;
    }
    float mx = -INFINITY;
    for (size_t s = 0; s < held; ++s) mx = std::max(mx, score[s]);
    float sum = 0.0f;
    for (size_t s = 0; s < held; ++s) sum += score[s] = cpu::fast_exp(score[s] - mx);
    size_t at = 0;
    for_each_held(row, [&](int32_t block, int count) {
      const float* values = pool.values(block, stage);
      for (int s = 0; s < count; ++s, ++at) {
        const float* v = values + size_t(s) * Dk + size_t(j) * d;
        for (int x = 0; x < d; ++x) o[x] += score[at] * v[x];
      }
    });
    p.max[item] = mx;
    p.sum[item] = sum;
  }
}

void combine_attention_partials(float* att, const AttentionPartials& p, int n, const ModelConfig& c,
                                dist::Communicator* comm, float* scratch) {
  const int d = int(c.head_dim), nq = int(c.num_q_heads);
  const size_t items = size_t(n) * nq;
  if (!comm || comm->world_size() == 1) {
    for (size_t it = 0; it < items; ++it) {
      const float inv = 1.0f / p.sum[it];
      for (int x = 0; x < d; ++x) att[it * d + x] = p.out[it * d + x] * inv;
    }
    return;
  }
  // One all-gather of [max | sum | out] per rank (in place: this rank's slot of the scratch),
  // then the merge in rank order on every rank.
  const int W = comm->world_size();
  const size_t per_rank = items * size_t(d + 2);
  float* mine = scratch + size_t(comm->rank()) * per_rank;
  std::memcpy(mine, p.max, sizeof(float) * items);
  std::memcpy(mine + items, p.sum, sizeof(float) * items);
  std::memcpy(mine + 2 * items, p.out, sizeof(float) * items * d);
  comm->all_gather(mine, scratch, per_rank, DType::F32);
  std::vector<double> O(static_cast<size_t>(d));
  for (size_t it = 0; it < items; ++it) {
    float M = -INFINITY;
    for (int r = 0; r < W; ++r) M = std::max(M, scratch[size_t(r) * per_rank + it]);
    double L = 0;
    std::fill(O.begin(), O.end(), 0.0);
    for (int r = 0; r < W; ++r) {
      const float* base = scratch + size_t(r) * per_rank;
      if (base[items + it] == 0.0f) continue;  // no position on rank r
      const double f = std::exp(double(base[it]) - double(M));
      L += f * base[items + it];
      for (int x = 0; x < d; ++x) O[size_t(x)] += f * base[2 * items + it * d + size_t(x)];
    }
    for (int x = 0; x < d; ++x) att[it * d + x] = float(O[size_t(x)] / L);
  }
}

}  // namespace zaya
