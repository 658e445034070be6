// Stateless sample order over prepared sources. Sample g (a global sample index, the only piece
// of loader state a run needs to save) is a pure function of (seed, g, phase):
//   source  = the mixture interval containing u = Philox(seed, mixture stream)(g), u in [0, 1)
//   n       = number of non-overlapping windows of seq_len + 1 tokens at offsets k * seq_len in
//             the source's concatenated train shards, n = (tokens - 1) / seq_len
//   window  = P_{seed, source, epoch}(g mod n) with epoch = g / n, P a keyed Feistel permutation
// Properties: any rank computes any sample without coordination or counters; for a single
// source, samples e*n .. e*n+n-1 visit every window exactly once (one epoch); with a mixture the
// sources are drawn with their weights in expectation and each source's windows are visited
// about weight * n_global / n times per n_global samples (sampled, not exact, coverage).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "data/data_config.h"
#include "data/shard.h"

namespace zaya {

// The shards of one split of one source, read as a single concatenated token stream.
class TokenStream {
 public:
  void add(ShardReader shard);
  int64_t size() const { return total_; }
  // Copies tokens [begin, begin + out.size()), crossing shard boundaries as needed.
  void read(int64_t begin, std::span<int32_t> out) const;
  // Non-overlapping windows of seq_len + 1 tokens starting at multiples of seq_len.
  int64_t windows(int64_t seq_len) const { return total_ > seq_len ? (total_ - 1) / seq_len : 0; }

 private:
  std::vector<ShardReader> shards_;
  std::vector<int64_t> starts_;  // token offset of each shard in the stream
  int64_t total_ = 0;
};

struct SampleLocation {
  int source = 0;
  int64_t window = 0;  // window index; tokens start at window * seq_len
};

class DataLoader {
 public:
  // Opens dir/<source>/index.json and the shards it lists for every configured source. Sources
  // must share one vocabulary. verify_checksums re-hashes every shard on open.
  DataLoader(DataConfig config, uint64_t seed, bool verify_checksums = true);

  const DataConfig& config() const { return config_; }
  int num_sources() const { return int(train_.size()); }
  int64_t vocab_size() const { return vocab_size_; }
  int32_t eos_id() const { return eos_id_; }
  int phase_at(int64_t tokens_consumed) const { return config_.phase_at(tokens_consumed); }

  // Where sample g of `phase` comes from (exposed for tests and logging).
  SampleLocation locate(int64_t g, int phase) const;
  // Fills out (exactly seq_len + 1 tokens of the phase) with sample g: inputs are out[0..L),
  // next-token targets out[1..L].
  void sample(int64_t g, int phase, std::span<int32_t> out) const;

  // Validation: the windows of a source's val shards in order, seq_len = out.size() - 1.
  int64_t val_windows(int source, int64_t seq_len) const;
  void val_sample(int source, int64_t i, std::span<int32_t> out) const;

  int64_t train_tokens(int source) const { return train_.at(size_t(source)).size(); }
  int64_t val_tokens(int source) const { return val_.at(size_t(source)).size(); }

 private:
  DataConfig config_;
  uint64_t seed_;
  int64_t vocab_size_ = 0;
  int32_t eos_id_ = -1;
  std::vector<TokenStream> train_, val_;
};

}  // namespace zaya
