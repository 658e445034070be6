// Finds added tokens (Hugging Face "added_tokens": Gemma's <bos>, <start_of_turn>, runs of "\n" or
// "\t", HTML tags) in raw text before normalisation, as Hugging Face and transformers.js do: at the
// earliest position where one starts, the longest one that matches there.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace zaya {

class AddedTokenMatcher {
 public:
  struct Match {
    size_t pos = std::string_view::npos;  // npos: none
    size_t length = 0;
    int32_t id = -1;
  };

  // `content` must not be empty; a repeated content keeps the first id.
  void add(std::string_view content, int32_t id);
  bool empty() const { return nodes_.size() == 1; }

  // The first match in text[from, end).
  Match find(std::string_view text, size_t from) const;

 private:
  // A byte trie: node 0 is the root; an edge is keyed by (node << 8) | byte.
  static uint64_t edge_key(int32_t node, uint8_t byte) { return (uint64_t(node) << 8) | byte; }
  std::vector<int32_t> nodes_ = {-1};  // the token id ending at each node, or -1
  std::unordered_map<uint64_t, int32_t> edges_;
  bool starts_token_[256] = {};  // first bytes, to skip most positions with one load
};

}  // namespace zaya
