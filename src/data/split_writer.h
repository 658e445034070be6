// One output split of a prepared source (train or val): tokens are appended in document order and
// stream into shard PREFIX-NNNNN.bin until it holds shard_tokens, then the next one starts. Memory
// is one append's worth, whatever the shard or corpus size.
#pragma once

#include <cstdint>
#include <memory>
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
  // Tokens added so far, in finished shards or not (the offset of the next document).
  int64_t tokens_added() const { return tokens_ + (current_ ? current_->tokens() : 0); }

 private:
  void open_shard();
  void close_shard();

  std::string dir_, prefix_;
  int64_t shard_tokens_, vocab_size_;
  bool progress_;
  std::unique_ptr<ShardFileWriter> current_;  // the shard being written, if any
  std::vector<ShardInfo> shards_;
  int64_t tokens_ = 0;
};

}  // namespace zaya
