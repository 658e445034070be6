#include "tokenizer/added_tokens.h"

#include "core/error.h"

namespace zaya {

void AddedTokenMatcher::add(std::string_view content, int32_t id) {
  ZAYA_CHECK(!content.empty(), "added token ", id, " is empty");
  int32_t node = 0;
  for (const char c : content) {
    const auto [it, fresh] = edges_.emplace(edge_key(node, uint8_t(c)), int32_t(nodes_.size()));
    if (fresh) nodes_.push_back(-1);
    node = it->second;
  }
  if (nodes_[node] < 0) nodes_[node] = id;
  starts_token_[uint8_t(content[0])] = true;
}

AddedTokenMatcher::Match AddedTokenMatcher::find(std::string_view text, size_t from) const {
  for (size_t i = from; i < text.size(); ++i) {
    if (!starts_token_[uint8_t(text[i])]) continue;
    Match best;
    int32_t node = 0;
    for (size_t j = i; j < text.size(); ++j) {
      const auto it = edges_.find(edge_key(node, uint8_t(text[j])));
      if (it == edges_.end()) break;
      node = it->second;
      if (nodes_[node] >= 0) best = {i, j + 1 - i, nodes_[node]};  // the longest wins
    }
    if (best.id >= 0) return best;
  }
  return {};
}

}  // namespace zaya
