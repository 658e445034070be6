// The cache of word encodings shared by the two BPE encoders (byte-level bpe_tokenizer,
// SentencePiece-style piece_bpe). Most of a text's words were seen before, so most of encoding is
// this lookup: it is a flat open-addressing table (a slot holds the word's hash and where its
// bytes and ids lie in one arena), so a hit costs about two cache lines, where a node-based map
// walked a bucket, a node and the ids' own allocation, with a division on the way.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace zaya {

// Encodings of words up to `max_word_bytes` long; emptied when it holds `max_entries`. Longer
// words are rare, and random data would flood the cache. Not thread-safe: one per tokenizer.
class WordCache {
 public:
  WordCache(size_t max_word_bytes, size_t max_entries);

  bool holds_words_of(std::string_view word) const { return word.size() <= max_word_bytes_; }
  // Appends the cached ids of `word` to `out`; false when it is not cached.
  bool append(std::string_view word, std::vector<int32_t>& out) const;
  // Caches `ids` as the encoding of `word` (which must not be cached yet).
  void remember(std::string_view word, std::span<const int32_t> ids);
  size_t size() const { return entries_; }

 private:
  struct Slot {
    uint64_t hash = 0;  // 0: empty (a word's hash is never 0, see hash_of)
    uint32_t offset;    // in arena_: the ids, then the word's bytes packed into int32s
    uint16_t id_count, word_bytes;
  };
  static uint64_t hash_of(std::string_view word);
  size_t find_slot(uint64_t hash, std::string_view word) const;  // its slot or an empty one
  void grow();

  size_t max_word_bytes_, max_entries_;
  size_t entries_ = 0;
  std::vector<Slot> slots_;     // a power of two long, at most half full
  std::vector<int32_t> arena_;  // every cached encoding, back to back
};

}  // namespace zaya
