#include "tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <queue>

#include "core/error.h"
#include "tokenizer/bpe_common.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/gpt2_pretokenizer.h"

namespace zaya {
namespace {

struct Symbol {
  int32_t id, prev, next;  // id -1: merged into its left neighbour
};

}  // namespace

BpeTokenizer::BpeTokenizer(BpeModel model) : model_(std::move(model)) {
  const std::string& src = model_.source;
  const int32_t n = vocab_size();
  ZAYA_CHECK(n > 0, src, ": the vocabulary is empty");
  special_.assign(n, false);
  for (const int32_t id : model_.special_ids) {
    ZAYA_CHECK(id >= 0 && id < n, src, ": special token id ", id, " is outside the vocabulary [0, ",
               n, ")");
    special_[id] = true;
    ZAYA_CHECK(!model_.tokens[id].empty(), src, ": special token ", id, " is empty");
    ZAYA_CHECK(id_of_special_.emplace(model_.tokens[id], id).second, src,
               ": special token text appears twice (id ", id, ")");
  }
  std::fill(std::begin(byte_id_), std::end(byte_id_), -1);
  for (int32_t id = 0; id < n; ++id) {
    if (special_[id]) continue;
    const std::string& t = model_.tokens[id];
    ZAYA_CHECK(!t.empty(), src, ": token ", id, " is empty");
    const auto [it, fresh] = id_of_token_.emplace(t, id);
    ZAYA_CHECK(fresh, src, ": token \"", bytes_to_byte_level(t), "\" has two ids (", it->second,
               " and ", id, ")");
    if (t.size() == 1) byte_id_[static_cast<uint8_t>(t[0])] = id;
  }
  for (int b = 0; b < 256; ++b) {
    ZAYA_CHECK(byte_id_[b] >= 0, src, ": no token for the single byte 0x", std::hex, b,
               " (a byte-level vocabulary needs all 256)");
  }
  merges_.reserve(model_.merges.size());
  for (size_t r = 0; r < model_.merges.size(); ++r) {
    const auto [a, b] = model_.merges[r];
    ZAYA_CHECK(a >= 0 && a < n && b >= 0 && b < n && !special_[a] && !special_[b], src, ": merge ",
               r, " refers to token ids (", a, ", ", b, ") that are not ordinary tokens");
    const auto merged = id_of_token_.find(model_.tokens[a] + model_.tokens[b]);
    ZAYA_CHECK(merged != id_of_token_.end(), src, ": merge ", r, " (\"",
               bytes_to_byte_level(model_.tokens[a]), "\" \"",
               bytes_to_byte_level(model_.tokens[b]),
               "\") makes a token that is not in the vocabulary");
    merges_.emplace(pair_key(a, b), Merge{int32_t(r), merged->second});  // first rank wins
  }
}

void BpeTokenizer::encode_append(std::string_view text, std::vector<int32_t>& out,
                                 const EncodeOptions& options) const {
  ZAYA_CHECK(!options.add_bos, model_.source,
             ": this byte-level BPE tokenizer has no beginning-of-sequence token to add");
  if (options.specials == SpecialTokens::kAsText || id_of_special_.empty()) {
    encode_text(text, out);
    return;
  }
  // Split at the earliest special token (the longest one where several start at the same place).
  while (!text.empty()) {
    size_t best_pos = std::string_view::npos, best_len = 0;
    int32_t best_id = -1;
    for (const auto& [s, id] : id_of_special_) {
      const size_t p = text.find(s);
      if (p < best_pos || (p == best_pos && p != std::string_view::npos && s.size() > best_len)) {
        best_pos = p, best_len = s.size(), best_id = id;
      }
    }
    if (best_pos == std::string_view::npos) {
      encode_text(text, out);
      return;
    }
    encode_text(text.substr(0, best_pos), out);
    out.push_back(best_id);
    text.remove_prefix(best_pos + best_len);
  }
}

void BpeTokenizer::encode_text(std::string_view text, std::vector<int32_t>& out) const {
  Gpt2WordSplitter words(text);
  std::string_view word;
  while (words.next(word)) encode_word(word, out);
}

void BpeTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.size() == 1) {
    out.push_back(byte_id_[static_cast<uint8_t>(word[0])]);
    return;
  }
  if (!word_cache_.holds_words_of(word)) return merge_word(word, out);
  if (word_cache_.append(word, out)) return;
  const size_t begin = out.size();
  merge_word(word, out);
  word_cache_.remember(word, std::span(out).subspan(begin));
}

void BpeTokenizer::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  const int32_t n = int32_t(word.size());
  std::vector<Symbol> sym(n);
  for (int32_t i = 0; i < n; ++i) sym[i] = {byte_id_[static_cast<uint8_t>(word[i])], i - 1, i + 1};
  sym[n - 1].next = -1;

  std::priority_queue<MergeCandidate, std::vector<MergeCandidate>, std::greater<MergeCandidate>>
      queue;
  const auto push_pair = [&](int32_t pos) {
    if (pos < 0 || sym[pos].next < 0) return;
    const int32_t right = sym[sym[pos].next].id;
    const auto it = merges_.find(pair_key(sym[pos].id, right));
    if (it != merges_.end())
      queue.push({it->second.rank, pos, sym[pos].id, right, it->second.merged_id});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push_pair(i);

  // GPT-2 merges every occurrence of the best pair in one left-to-right pass before it looks at
  // the pairs that pass created, so candidates of one rank are applied as a batch.
  std::vector<MergeCandidate> batch;
  std::vector<int32_t> touched;
  while (!queue.empty()) {
    const int32_t rank = queue.top().rank;
    batch.clear();
    while (!queue.empty() && queue.top().rank == rank) {
      batch.push_back(queue.top());
      queue.pop();
    }
    touched.clear();
    for (const MergeCandidate& c : batch) {
      Symbol& left = sym[c.pos];
      if (left.id != c.left || left.next < 0 || sym[left.next].id != c.right) continue;  // stale
      Symbol& right = sym[left.next];
      left.id = c.merged;
      right.id = -1;
      left.next = right.next;
      if (right.next >= 0) sym[right.next].prev = c.pos;
      touched.push_back(c.pos);
    }
    for (const int32_t pos : touched) {
      if (sym[pos].id < 0) continue;
      push_pair(sym[pos].prev);
      push_pair(pos);
    }
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (const int32_t id : ids) out += id_to_token(id);
  return out;
}

std::optional<int32_t> BpeTokenizer::token_to_id(std::string_view token_bytes) const {
  const std::string key(token_bytes);
  if (const auto it = id_of_special_.find(key); it != id_of_special_.end()) return it->second;
  if (const auto it = id_of_token_.find(key); it != id_of_token_.end()) return it->second;
  return std::nullopt;
}

const std::string& BpeTokenizer::id_to_token(int32_t id) const {
  ZAYA_CHECK(id >= 0 && id < vocab_size(), "token id ", id, " is outside the vocabulary [0, ",
             vocab_size(), ") of ", model_.source);
  return model_.tokens[id];
}

bool BpeTokenizer::is_special(int32_t id) const {
  return id >= 0 && id < vocab_size() && special_[id];
}

}  // namespace zaya
