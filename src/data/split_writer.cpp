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
  while (!tokens.empty()) {
    if (!current_) open_shard();
    const size_t take = std::min(size_t(shard_tokens_ - current_->tokens()), tokens.size());
    current_->append(tokens.first(take));
    tokens = tokens.subspan(take);
    if (current_->tokens() == shard_tokens_) close_shard();
  }
}

void SplitWriter::finish() {
  if (!current_ && shards_.empty()) open_shard();
  if (current_) close_shard();
}

void SplitWriter::open_shard() {
  char name[32];
  std::snprintf(name, sizeof name, "%s-%05zu.bin", prefix_.c_str(), shards_.size());
  current_ =
      std::make_unique<ShardFileWriter>((std::filesystem::path(dir_) / name).string(), vocab_size_);
}

void SplitWriter::close_shard() {
  ShardInfo info = current_->finish();
  current_.reset();
  info.path = std::filesystem::path(info.path).filename().string();  // relative to the source
  tokens_ += info.tokens;
  if (progress_)
    std::fprintf(stderr, "  wrote %s: %lld tokens\n", info.path.c_str(),
                 static_cast<long long>(info.tokens));
  shards_.push_back(std::move(info));
}

}  // namespace zaya
