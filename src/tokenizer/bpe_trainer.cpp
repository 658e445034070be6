#include "tokenizer/bpe_trainer.h"

#include <algorithm>
#include <queue>
#include <unordered_set>

#include "core/error.h"
#include "tokenizer/gpt2_pretokenizer.h"

namespace zaya {
namespace {

uint64_t pair_key(int32_t a, int32_t b) {
  return (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
}
int32_t key_left(uint64_t k) {
  return int32_t(k >> 32);
}
int32_t key_right(uint64_t k) {
  return int32_t(k & 0xFFFFFFFFu);
}

struct Word {
  std::vector<int32_t> symbols;
  int64_t count;
};

// The trainer's state: words as symbol sequences, pair counts, which words hold each pair, and a
// max-heap of pair counts whose stale entries (counts only fall, except for pairs with the newest
// token, which are pushed afresh) are re-pushed with their current count when popped.
class PairTrainer {
 public:
  PairTrainer(const WordCounts& counts, std::vector<std::string>& tokens) : tokens_(tokens) {
    std::vector<const std::pair<const std::string, int64_t>*> sorted;
    for (const auto& wc : counts) sorted.push_back(&wc);
    std::sort(sorted.begin(), sorted.end(), [](auto* x, auto* y) { return x->first < y->first; });
    for (const auto* wc : sorted) {
      if (wc->first.size() < 2) continue;  // a single byte holds no pair
      Word w{{}, wc->second};
      for (const char c : wc->first) w.symbols.push_back(static_cast<uint8_t>(c));
      words_.push_back(std::move(w));
    }
    for (int32_t wi = 0; wi < int32_t(words_.size()); ++wi) {
      const Word& w = words_[wi];
      for (size_t i = 0; i + 1 < w.symbols.size(); ++i) {
        const uint64_t k = pair_key(w.symbols[i], w.symbols[i + 1]);
        pair_count_[k] += w.count;
        where_[k].push_back(wi);
      }
    }
    for (const auto& [k, c] : pair_count_) heap_.push({c, k});
    seen_at_step_.assign(words_.size(), -1);
  }

  // The next pair to merge, or false when no pair has at least min_count occurrences.
  bool best_pair(int64_t min_count, uint64_t& key) {
    while (!heap_.empty()) {
      const Entry e = heap_.top();
      heap_.pop();
      const auto it = pair_count_.find(e.key);
      const int64_t now = it == pair_count_.end() ? 0 : it->second;
      if (now != e.count) {
        if (now > 0) heap_.push({now, e.key});
        continue;
      }
      if (now < min_count) return false;
      key = e.key;
      return true;
    }
    return false;
  }

  // Replaces every occurrence of `key` by `new_id` and updates the counts of the affected pairs.
  void merge(uint64_t key, int32_t new_id, int32_t step) {
    const int32_t a = key_left(key), b = key_right(key);
    const std::vector<int32_t> holders = std::move(where_[key]);
    where_.erase(key);
    std::unordered_set<uint64_t> fresh;
    for (const int32_t wi : holders) {
      if (seen_at_step_[wi] == step) continue;
      seen_at_step_[wi] = step;
      Word& w = words_[wi];
      std::vector<int32_t>& s = w.symbols;
      for (size_t i = 0; i + 1 < s.size(); ++i) pair_count_[pair_key(s[i], s[i + 1])] -= w.count;
      size_t out = 0;
      for (size_t i = 0; i < s.size(); ++i) {
        if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
          s[out++] = new_id;
          ++i;
        } else {
          s[out++] = s[i];
        }
      }
      s.resize(out);
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        const uint64_t k = pair_key(s[i], s[i + 1]);
        pair_count_[k] += w.count;
        if (s[i] == new_id || s[i + 1] == new_id) {
          where_[k].push_back(wi);
          fresh.insert(k);
        }
      }
    }
    pair_count_.erase(key);
    for (const uint64_t k : fresh) heap_.push({pair_count_[k], k});
  }

 private:
  struct Entry {
    int64_t count;
    uint64_t key;
  };
  // Max-heap order: higher count first, then the lexicographically smaller (left, right) bytes.
  struct Lower {
    const std::vector<std::string>* tokens;
    bool operator()(const Entry& x, const Entry& y) const {
      if (x.count != y.count) return x.count < y.count;
      const auto& t = *tokens;
      const int c = t[key_left(x.key)].compare(t[key_left(y.key)]);
      if (c != 0) return c > 0;
      return t[key_right(x.key)] > t[key_right(y.key)];
    }
  };

  std::vector<std::string>& tokens_;
  std::vector<Word> words_;
  std::unordered_map<uint64_t, int64_t> pair_count_;
  std::unordered_map<uint64_t, std::vector<int32_t>> where_;
  std::vector<int32_t> seen_at_step_;
  std::priority_queue<Entry, std::vector<Entry>, Lower> heap_{Lower{&tokens_}};
};

}  // namespace

void count_words(std::string_view text, WordCounts& counts) {
  Gpt2WordSplitter words(text);
  std::string_view word;
  while (words.next(word)) ++counts[std::string(word)];
}

BpeTokenizer train_bpe(const WordCounts& counts, const BpeTrainOptions& options) {
  const int32_t n_special = int32_t(options.special_tokens.size());
  ZAYA_CHECK(options.vocab_size >= 256 + n_special, "tokenizer train: --vocab-size ",
             options.vocab_size, " is too small: it must hold the 256 byte tokens and ", n_special,
             " special token(s)");
  BpeModel model;
  model.source = "trained tokenizer";
  for (int b = 0; b < 256; ++b) model.tokens.push_back(std::string(1, static_cast<char>(b)));
  const int32_t wanted = options.vocab_size - 256 - n_special;
  PairTrainer trainer(counts, model.tokens);
  uint64_t key = 0;
  for (int32_t step = 0; step < wanted && trainer.best_pair(options.min_pair_count, key); ++step) {
    const int32_t a = key_left(key), b = key_right(key);
    const int32_t new_id = int32_t(model.tokens.size());
    model.tokens.push_back(model.tokens[a] + model.tokens[b]);
    model.merges.emplace_back(a, b);
    trainer.merge(key, new_id, step);
    if (options.progress && ((step + 1) % 256 == 0 || step + 1 == wanted))
      options.progress(step + 1, wanted);
  }
  for (const std::string& s : options.special_tokens) {
    model.special_ids.push_back(int32_t(model.tokens.size()));
    model.tokens.push_back(s);
  }
  return BpeTokenizer(std::move(model));
}

BpeTokenizer train_bpe(const std::vector<std::string>& texts, const BpeTrainOptions& options) {
  WordCounts counts;
  for (const std::string& t : texts) count_words(t, counts);
  return train_bpe(counts, options);
}

}  // namespace zaya
