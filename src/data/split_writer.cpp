#include "data/split_writer.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace zaya {

SplitWriter::SplitWriter(std::string dir, std::string prefix, int64_t shard_tokens,
                         int64_t vocab_size, bool progress)
    : dir_(std::move(dir)),
      prefix_(std::move(prefix)),
      shard_tokens_(shard_tokens),
      vocab_size_(vocab_size),
      progress_(progress) {}

void SplitWriter::add(std::span<const int32_t> tokens) {
  size_t pos = 0;
  while (pos < tokens.size()) {
    const size_t room = size_t(shard_tokens_) - buffer_.size();
    const size_t take = std::min(room, tokens.size() - pos);
    buffer_.insert(buffer_.end(), tokens.begin() + long(pos), tokens.begin() + long(pos + take));
    pos += take;
    if (int64_t(buffer_.size()) == shard_tokens_) flush();
  }
}

void SplitWriter::finish() {
  if (!buffer_.empty() || shards_.empty()) flush();
}

void SplitWriter::flush() {
  char name[32];
  std::snprintf(name, sizeof name, "%s-%05zu.bin", prefix_.c_str(), shards_.size());
  ShardInfo info = write_shard((std::filesystem::path(dir_) / name).string(), buffer_, vocab_size_);
  info.path = name;  // index.json refers to shards relative to the source directory
  tokens_ += info.tokens;
  if (progress_)
    std::fprintf(stderr, "  wrote %s: %lld tokens\n", name, static_cast<long long>(info.tokens));
  shards_.push_back(std::move(info));
  buffer_.clear();
}

}  // namespace zaya
