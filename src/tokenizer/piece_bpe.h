// SentencePiece-style BPE over the characters of a word (Gemma-3, Llama): each Unicode character
// starts as its own piece and the adjacent pair with the lowest merge rank is merged, one pair at a
// time, the leftmost first among equal ranks, until no ranked pair is left. Exactly the order of
// transformers.js and Hugging Face tokenizers: Gemma's merge list is not self-consistent (a merge
// may use a piece that only a later merge makes), so the order matters. A character without a
// piece, and each byte that is not UTF-8, becomes byte-fallback tokens "<0xNN>" (or the unknown
// token when byte fallback is off).
//
// Speed: a Gemma word is a whole line ("▁" joins its words), too long to cache. But no merge can
// join a character c to a following "▁" unless some piece holds "c▁" (every merge makes a piece),
// and BPE on pieces that can never merge equals BPE on each part alone. So a word is cut before
// each "▁" whose predecessor is neither "▁" nor such a c (Gemma: only ">" is, from ">▁</"),
// and the parts, ordinary words again, are cached: exact, not an approximation.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/bpe_common.h"

namespace zaya {

struct PieceBpeSpec {
  std::unordered_map<std::string, int32_t> id_of_piece;     // UTF-8 piece text -> id
  std::vector<std::pair<std::string, std::string>> merges;  // by rank: (left, right) texts
  bool byte_fallback = false;        // needs all 256 pieces "<0x00>".."<0xFF>"
  std::optional<int32_t> unk_id;     // required when byte_fallback is false
  bool fuse_unk = false;             // consecutive unknown tokens of a section become one
  std::string source = "tokenizer";  // names the origin in errors ("file: model")
};

class PieceBpe {
 public:
  // Errors name `spec.source`: merges of unknown pieces or making unknown pieces, missing byte
  // pieces, a missing unknown token.
  explicit PieceBpe(const PieceBpeSpec& spec);

  // Appends the ids of the words (normalised, pre-tokenised text) of one stretch between added
  // tokens. Not thread-safe (cache).
  void encode_words(std::span<const std::string_view> words, std::vector<int32_t>& out) const;
  int32_t merge_count() const { return merge_count_; }

 private:
  // (left id, right id) -> (rank, merged id), open addressing: the lookup on the hot path.
  class PairTable {
   public:
    struct Slot {
      uint64_t key;
      int32_t rank, merged;
    };
    void reserve(size_t entries);
    bool insert(uint64_t key, int32_t rank, int32_t merged);  // false: key already there
    const Slot* find(uint64_t key) const;

   private:
    static constexpr uint64_t kEmpty = ~uint64_t(0);
    size_t home(uint64_t key) const;
    std::vector<Slot> slots_;
  };
  struct Symbol {
    int32_t id;              // -1: a character without a piece, or a byte that is not UTF-8
    int32_t prev, next;      // -1 at the ends
    uint32_t begin, length;  // its bytes in the word
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
  }
  int32_t piece_of_char(uint32_t code_point) const;
  bool glues_to_meta(uint32_t code_point) const;
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  void encode_part(std::string_view part, std::vector<int32_t>& out) const;
  void merge_part(std::string_view part, std::vector<int32_t>& out) const;

  std::vector<int32_t> bmp_piece_;  // code point < 0x10000 -> piece id or -1
  std::unordered_map<uint32_t, int32_t> astral_piece_;
  std::vector<uint32_t> glues_to_meta_;  // sorted: the characters c of pieces holding "c▁"
  PairTable merges_;
  int32_t merge_count_ = 0;
  bool byte_fallback_;
  int32_t byte_piece_[256];
  int32_t unk_id_ = -1;
  bool fuse_unk_;
  mutable std::vector<Symbol> symbols_;       // scratch, reused across words
  mutable std::vector<MergeCandidate> heap_;  // scratch, reused across words
  // Parts of words (see above) are short and repeat; long ones rarely do.
  mutable WordCache word_cache_{256, size_t(1) << 18};
};

}  // namespace zaya
