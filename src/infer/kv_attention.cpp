#include "infer/kv_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace zaya {

void kv_block_table(int32_t* blocks, int32_t* counts, int max_blocks,
                    std::span<const int32_t> seq_blocks, int64_t length, const KvShard& shard,
                    int block_size) {
  for (int i = 0; i < max_blocks; ++i) {
    blocks[i] = 0;
    counts[i] = 0;
  }
  for (size_t i = 0; i < seq_blocks.size() && int(i) < max_blocks; ++i) {
    const int64_t count =
        std::min<int64_t>(block_size, length - shard.first_position(i, block_size));
    if (count <= 0) break;
    blocks[i] = seq_blocks[i];
    counts[i] = int32_t(count);
  }
}

void kv_attention_partials(const Backend& be, const AttentionPartials& p, float* scores,
                           const float* q, const PagedKv& kv, int n, const ModelConfig& c) {
  be.kv_attention_partials(p.max, p.sum, p.out, scores, q, kv, n, int(c.num_q_heads),
                           int(c.num_kv_heads), int(c.head_dim));
}

void combine_attention_partials(const Backend& be, float* att, const AttentionPartials& p, int n,
                                const ModelConfig& c, dist::Communicator* comm, float* scratch) {
  const int d = int(c.head_dim), nq = int(c.num_q_heads);
  const size_t items = size_t(n) * nq;
  if (!comm || comm->world_size() == 1) {
    be.kv_attention_normalize(att, p.sum, p.out, int(items), d);
    return;
  }
  ZAYA_CHECK(be.host_memory(),
             "decoding sharded over ranks (tree attention) runs on host memory "
             "only; the '",
             be.name(), "' backend keeps its own");
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
