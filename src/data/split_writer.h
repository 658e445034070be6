// One output split of a prepared source (train or val): tokens are appended in document order and
// a shard PREFIX-NNNNN.bin is written each time shard_tokens have gathered, so memory holds at
// most one shard of tokens whatever the corpus size.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "data/shard.h"

namespace zaya {

class SplitWriter {
 public:
  SplitWriter(std::string dir, std::string prefix, int64_t shard_tokens, int64_t vocab_size,
              bool progress);

  void add(std::span<const int32_t> tokens);
  // Writes the partial last shard; a split with no tokens at all still gets one (empty) shard so
  // that every source has a val-00000.bin to point at.
  void finish();

  const std::vector<ShardInfo>& shards() const { return shards_; }
  int64_t tokens() const { return tokens_; }
  // Tokens added so far, written or not (the offset of the next document in this split).
  int64_t tokens_added() const { return tokens_ + int64_t(buffer_.size()); }

 private:
  void flush();

  std::string dir_, prefix_;
  int64_t shard_tokens_, vocab_size_;
  bool progress_;
  std::vector<int32_t> buffer_;
  std::vector<ShardInfo> shards_;
  int64_t tokens_ = 0;
};

}  // namespace zaya
