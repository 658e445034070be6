// Pieces shared by the two BPE encoders (byte-level bpe_tokenizer, SentencePiece-style piece_bpe):
// the merge candidate of their priority queues and the cache of word encodings.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace zaya {

// A merge candidate: the adjacent pair starting at symbol `pos`, valid while both symbols still
// hold the ids it was made from (a symbol's token only grows, so an id never comes back to a
// position). Ordered by rank, then leftmost first. `merged` is the id the merge makes.
struct MergeCandidate {
  int32_t rank, pos, left, right, merged;
  bool operator>(const MergeCandidate& o) const {
    return rank != o.rank ? rank > o.rank : pos > o.pos;
  }
};

// Encodings of words up to `max_word_bytes` long; emptied when it holds `max_entries`. Longer
// words are rare, and random data would flood the cache.
class WordCache {
 public:
  WordCache(size_t max_word_bytes, size_t max_entries)
      : max_word_bytes_(max_word_bytes), max_entries_(max_entries) {}

  bool holds_words_of(std::string_view word) const { return word.size() <= max_word_bytes_; }
  // Appends the cached ids of `word` to `out`; false when it is not cached.
  bool append(std::string_view word, std::vector<int32_t>& out) const {
    const auto it = ids_.find(word);
    if (it == ids_.end()) return false;
    out.insert(out.end(), it->second.begin(), it->second.end());
    return true;
  }
  void remember(std::string_view word, std::span<const int32_t> ids) {
    if (ids_.size() >= max_entries_) ids_.clear();
    ids_.emplace(std::string(word), std::vector<int32_t>(ids.begin(), ids.end()));
  }

 private:
  struct Hash {  // lets find() take a string_view without building a std::string
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  size_t max_word_bytes_, max_entries_;
  std::unordered_map<std::string, std::vector<int32_t>, Hash, std::equal_to<>> ids_;
};

}  // namespace zaya
