// Pieces shared by the two BPE encoders (byte-level bpe_tokenizer, SentencePiece-style piece_bpe):
// the merge candidate of their priority queues and (word_cache.h) the cache of word encodings.
#pragma once

#include <cstdint>

#include "tokenizer/word_cache.h"

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

}  // namespace zaya
