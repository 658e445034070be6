// Byte-level BPE (GPT-2 style): text is split into words by GPT-2's pattern, each word's bytes
// start as single-byte tokens, and the lowest-ranked adjacent pair is merged (every occurrence,
// left to right) until no ranked pair is left. Any byte string round-trips exactly through
// encode/decode: UTF-8 or not.
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
#include "tokenizer/tokenizer.h"

namespace zaya {

// What a tokenizer is made of. Tokens are raw bytes (not the byte-level alphabet of the files).
struct BpeModel {
  std::vector<std::string> tokens;                  // by id
  std::vector<std::pair<int32_t, int32_t>> merges;  // by rank: (left id, right id)
  std::vector<int32_t> special_ids;                 // e.g. <|endoftext|>: never made by merges
  std::string source = "tokenizer";                 // names the origin in error messages
};

class BpeTokenizer final : public Tokenizer {
 public:
  // Validates the model: every byte has a single-byte token, merges refer to existing tokens and
  // their concatenation is itself a token. Errors name `model.source`.
  explicit BpeTokenizer(BpeModel model);

  // Not thread-safe: encoding fills a per-object cache of word encodings. Use one copy per thread.
  void encode_append(std::string_view text, std::vector<int32_t>& out,
                     const EncodeOptions& options) const override;
  std::string decode(std::span<const int32_t> ids) const override;

  int32_t vocab_size() const override { return int32_t(model_.tokens.size()); }
  int32_t merge_count() const { return int32_t(model_.merges.size()); }
  std::optional<int32_t> token_to_id(std::string_view token_bytes) const override;
  const std::string& id_to_token(int32_t id) const;  // raw bytes; throws on an id out of range
  bool is_special(int32_t id) const;
  std::optional<int32_t> end_of_text_id() const override { return token_to_id("<|endoftext|>"); }
  std::optional<int32_t> bos_id() const override { return std::nullopt; }  // GPT-2 has none
  std::unique_ptr<Tokenizer> clone() const override {
    return std::make_unique<BpeTokenizer>(*this);
  }
  const BpeModel& model() const { return model_; }

 private:
  struct Merge {
    int32_t rank;
    int32_t merged_id;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
  }
  void encode_text(std::string_view text, std::vector<int32_t>& out) const;
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;

  BpeModel model_;
  std::unordered_map<std::string, int32_t> id_of_token_;  // ordinary tokens
  std::unordered_map<std::string, int32_t> id_of_special_;
  std::vector<bool> special_;
  int32_t byte_id_[256];
  std::unordered_map<uint64_t, Merge> merges_;
  mutable WordCache word_cache_{64, size_t(1) << 20};
};

}  // namespace zaya
