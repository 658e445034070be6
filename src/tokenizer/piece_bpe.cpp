#include "tokenizer/piece_bpe.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "tokenizer/unicode_class.h"

namespace zaya {
namespace {

using Candidate = MergeCandidate;

constexpr uint32_t kMetaSymbol = 0x2581;  // "▁", SentencePiece's stand-in for a space

// The single code point of `piece`, or nullopt when it is not exactly one UTF-8 character.
std::optional<uint32_t> single_code_point(std::string_view piece) {
  if (piece.empty()) return std::nullopt;
  const Utf8Unit u = decode_utf8_unit(piece, 0);
  if (u.invalid || u.length != piece.size()) return std::nullopt;
  return u.code_point;
}

// Appends the characters of `piece` (other than "▁") that are directly followed by "▁".
void collect_chars_before_meta(std::string_view piece, std::vector<uint32_t>& out) {
  std::optional<uint32_t> before;
  for (size_t pos = 0; pos < piece.size();) {
    const Utf8Unit u = decode_utf8_unit(piece, pos);
    const bool meta = !u.invalid && u.code_point == kMetaSymbol;
    if (meta && before) out.push_back(*before);
    before = u.invalid || meta ? std::nullopt : std::optional<uint32_t>(u.code_point);
    pos += u.length;
  }
}

}  // namespace

void PieceBpe::PairTable::reserve(size_t entries) {
  size_t n = 16;
  while (n < 2 * entries) n *= 2;  // at most half full: short probe runs
  slots_.assign(n, Slot{kEmpty, 0, 0});
}

size_t PieceBpe::PairTable::home(uint64_t key) const {
  key ^= key >> 33;  // a 64-bit mix (MurmurHash3's finaliser) so nearby ids spread out
  key *= 0xff51afd7ed558ccdULL;
  key ^= key >> 33;
  return size_t(key) & (slots_.size() - 1);
}

bool PieceBpe::PairTable::insert(uint64_t key, int32_t rank, int32_t merged) {
  for (size_t i = home(key);; i = (i + 1) & (slots_.size() - 1)) {
    if (slots_[i].key == key) return false;
    if (slots_[i].key == kEmpty) {
      slots_[i] = {key, rank, merged};
      return true;
    }
  }
}

const PieceBpe::PairTable::Slot* PieceBpe::PairTable::find(uint64_t key) const {
  for (size_t i = home(key);; i = (i + 1) & (slots_.size() - 1)) {
    if (slots_[i].key == key) return &slots_[i];
    if (slots_[i].key == kEmpty) return nullptr;
  }
}

PieceBpe::PieceBpe(const PieceBpeSpec& spec)
    : byte_fallback_(spec.byte_fallback), fuse_unk_(spec.fuse_unk) {
  const std::string& src = spec.source;
  bmp_piece_.assign(0x10000, -1);
  for (const auto& [piece, id] : spec.id_of_piece) {
    collect_chars_before_meta(piece, glues_to_meta_);
    const auto cp = single_code_point(piece);
    if (!cp) continue;
    if (*cp < 0x10000) {
      bmp_piece_[*cp] = id;
    } else {
      astral_piece_[*cp] = id;
    }
  }
  const auto id_of = [&](const std::string& piece) {
    const auto it = spec.id_of_piece.find(piece);
    return it == spec.id_of_piece.end() ? -1 : it->second;
  };
  if (byte_fallback_) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      byte_piece_[b] = id_of(name);
      ZAYA_CHECK(byte_piece_[b] >= 0, src, ".byte_fallback is true but the vocabulary has no \"",
                 name, "\" (byte fallback needs all 256 byte pieces)");
    }
  }
  if (spec.unk_id) unk_id_ = *spec.unk_id;
  ZAYA_CHECK(byte_fallback_ || unk_id_ >= 0, src,
             ": without byte_fallback an unk_token in the vocabulary is required");

  merges_.reserve(spec.merges.size());
  for (size_t r = 0; r < spec.merges.size(); ++r) {
    const auto& [left, right] = spec.merges[r];
    const int32_t a = id_of(left), b = id_of(right), merged = id_of(left + right);
    ZAYA_CHECK(a >= 0 && b >= 0, src, ".merges[", r, "] (\"", left, "\" \"", right, "\"): piece \"",
               a < 0 ? left : right, "\" is not in the vocabulary");
    ZAYA_CHECK(merged >= 0, src, ".merges[", r, "] (\"", left, "\" \"", right, "\") makes \"",
               left + right, "\", which is not in the vocabulary");
    merges_.insert(pair_key(a, b), int32_t(r), merged);  // a repeated pair keeps its first rank
  }
  merge_count_ = int32_t(spec.merges.size());
  std::sort(glues_to_meta_.begin(), glues_to_meta_.end());
}

bool PieceBpe::glues_to_meta(uint32_t code_point) const {
  return std::binary_search(glues_to_meta_.begin(), glues_to_meta_.end(), code_point);
}

int32_t PieceBpe::piece_of_char(uint32_t code_point) const {
  if (code_point < 0x10000) return bmp_piece_[code_point];
  const auto it = astral_piece_.find(code_point);
  return it == astral_piece_.end() ? -1 : it->second;
}

void PieceBpe::encode_words(std::span<const std::string_view> words,
                            std::vector<int32_t>& out) const {
  const size_t begin = out.size();
  for (const std::string_view word : words) encode_word(word, out);
  if (!fuse_unk_ || unk_id_ < 0) return;
  const auto repeated_unk = [&](int32_t a, int32_t b) { return a == unk_id_ && b == unk_id_; };
  out.erase(std::unique(out.begin() + begin, out.end(), repeated_unk), out.end());
}

void PieceBpe::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  size_t part = 0;
  bool glued = true;  // whether a "▁" here would stay with what comes before it
  for (size_t pos = 0; pos < word.size();) {
    const Utf8Unit u = decode_utf8_unit(word, pos);
    const bool meta = !u.invalid && u.code_point == kMetaSymbol;
    if (meta && !glued) {
      encode_part(word.substr(part, pos - part), out);
      part = pos;
    }
    // A byte that is not UTF-8 never merges, so a "▁" after it may start a part.
    glued = meta || (!u.invalid && glues_to_meta(u.code_point));
    pos += u.length;
  }
  encode_part(word.substr(part), out);
}

void PieceBpe::encode_part(std::string_view part, std::vector<int32_t>& out) const {
  if (part.empty()) return;
  if (!word_cache_.holds_words_of(part)) return merge_part(part, out);
  if (word_cache_.append(part, out)) return;
  const size_t begin = out.size();
  merge_part(part, out);
  word_cache_.remember(part, std::span(out).subspan(begin));
}

void PieceBpe::merge_part(std::string_view word, std::vector<int32_t>& out) const {
  std::vector<Symbol>& sym = symbols_;
  sym.clear();
  for (size_t pos = 0; pos < word.size();) {
    const Utf8Unit u = decode_utf8_unit(word, pos);
    const int32_t id = u.invalid ? -1 : piece_of_char(u.code_point);
    const int32_t i = int32_t(sym.size());
    sym.push_back({id, i - 1, i + 1, uint32_t(pos), u.length});
    pos += u.length;
  }
  sym.back().next = -1;

  // A min-heap of candidates in a buffer reused across parts.
  std::vector<Candidate>& heap = heap_;
  heap.clear();
  const std::greater<Candidate> later;
  const auto push_pair = [&](int32_t pos) {
    if (pos < 0 || sym[pos].next < 0) return;
    const int32_t left = sym[pos].id, right = sym[sym[pos].next].id;
    if (left < 0 || right < 0) return;
    if (const auto* m = merges_.find(pair_key(left, right))) {
      heap.push_back({m->rank, pos, left, right, m->merged});
      std::push_heap(heap.begin(), heap.end(), later);
    }
  };
  for (int32_t i = 0; i + 1 < int32_t(sym.size()); ++i) push_pair(i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& left = sym[c.pos];
    if (left.id != c.left || left.next < 0 || sym[left.next].id != c.right) continue;  // stale
    Symbol& right = sym[left.next];
    left.id = c.merged;
    left.length += right.length;
    right.id = -2;  // merged away: no candidate can match it again
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = c.pos;
    push_pair(left.prev);
    push_pair(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) {
    if (sym[i].id >= 0) {
      out.push_back(sym[i].id);
    } else if (byte_fallback_) {
      for (const char c : word.substr(sym[i].begin, sym[i].length))
        out.push_back(byte_piece_[uint8_t(c)]);
    } else {
      out.push_back(unk_id_);
    }
  }
}

}  // namespace zaya
