#include "tokenizer/word_cache.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>

namespace zaya {

namespace {

constexpr size_t kFirstSlots = 1024;

size_t int32s_for_bytes(size_t bytes) {
  return (bytes + 3) / 4;
}

// memcmp(a, b, n) == 0 for the short words of a text without a call into libc (which cost more
// than the comparison itself): 8 bytes at a time, then the rest.
bool same_bytes(const char* a, const char* b, size_t n) {
  for (; n >= 8; a += 8, b += 8, n -= 8) {
    uint64_t x, y;
    std::memcpy(&x, a, 8);
    std::memcpy(&y, b, 8);
    if (x != y) return false;
  }
  for (; n > 0; ++a, ++b, --n)
    if (*a != *b) return false;
  return true;
}

}  // namespace

WordCache::WordCache(size_t max_word_bytes, size_t max_entries)
    : max_word_bytes_(std::min<size_t>(max_word_bytes, std::numeric_limits<uint16_t>::max())),
      max_entries_(max_entries) {}

uint64_t WordCache::hash_of(std::string_view word) {
  const uint64_t h = std::hash<std::string_view>{}(word);
  return h == 0 ? 1 : h;
}

size_t WordCache::find_slot(uint64_t hash, std::string_view word) const {
  const size_t mask = slots_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.hash == 0) return i;
    if (s.hash == hash && s.word_bytes == word.size() &&
        same_bytes(reinterpret_cast<const char*>(arena_.data() + s.offset + s.id_count),
                   word.data(), word.size()))
      return i;
  }
}

bool WordCache::append(std::string_view word, std::vector<int32_t>& out) const {
  if (slots_.empty()) return false;
  const Slot& s = slots_[find_slot(hash_of(word), word)];
  if (s.hash == 0) return false;
  const int32_t* ids = arena_.data() + s.offset;
  if (s.id_count <= 8) {  // most words: a call to memmove would cost more than the copy
    for (int i = 0; i < s.id_count; ++i) out.push_back(ids[i]);
  } else {
    out.insert(out.end(), ids, ids + s.id_count);
  }
  return true;
}

void WordCache::remember(std::string_view word, std::span<const int32_t> ids) {
  if (!holds_words_of(word) || ids.size() > std::numeric_limits<uint16_t>::max()) return;
  if (entries_ >= max_entries_) {  // full: start again (cheaper than evicting one by one)
    std::fill(slots_.begin(), slots_.end(), Slot{});
    arena_.clear();
    entries_ = 0;
  }
  const size_t need = ids.size() + int32s_for_bytes(word.size());
  if (arena_.size() + need > std::numeric_limits<uint32_t>::max()) return;
  if (2 * (entries_ + 1) > slots_.size()) grow();
  const uint64_t hash = hash_of(word);
  Slot& s = slots_[find_slot(hash, word)];
  s.hash = hash;
  s.offset = uint32_t(arena_.size());
  s.id_count = uint16_t(ids.size());
  s.word_bytes = uint16_t(word.size());
  arena_.insert(arena_.end(), ids.begin(), ids.end());
  arena_.resize(arena_.size() + int32s_for_bytes(word.size()), 0);
  std::memcpy(arena_.data() + s.offset + s.id_count, word.data(), word.size());
  ++entries_;
}

void WordCache::grow() {
  std::vector<Slot> old(std::max(kFirstSlots, 2 * slots_.size()));
  old.swap(slots_);
  const size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.hash == 0) continue;
    size_t i = s.hash & mask;
    while (slots_[i].hash != 0) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

}  // namespace zaya
