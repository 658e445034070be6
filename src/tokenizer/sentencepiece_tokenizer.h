// A Hugging Face tokenizer.json of the SentencePiece kind (Gemma-3): added tokens are split out of
// the raw text first, each stretch between them is normalised (Gemma: " " -> "▁"), split into
// words by the pre-tokenizer, and each word is encoded by BPE over characters with byte fallback
// (piece_bpe.h). Matches transformers.js and Hugging Face tokenizers id for id.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/hf_json.h"
#include "tokenizer/piece_bpe.h"
#include "tokenizer/text_pipeline.h"
#include "tokenizer/tokenizer.h"

namespace zaya {

struct SentencePieceBpeParts {
  std::vector<std::string> tokens;  // by id: pieces and added tokens, UTF-8 text
  std::vector<AddedTokenEntry> added;
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  TokenDecoder decoder;
  std::optional<int32_t> bos_id;  // the post_processor's leading special token
  std::string source = "tokenizer";
};

class SentencePieceBpeTokenizer final : public Tokenizer {
 public:
  // `model.id_of_piece` must map every piece of `parts.tokens` that is not an added token.
  SentencePieceBpeTokenizer(SentencePieceBpeParts parts, PieceBpeSpec model);

  // Special added tokens (Gemma: <bos>, <eos>, <start_of_turn>, ...) are recognised with
  // SpecialTokens::kRecognise; the others (runs of "\n", "\t", "▁", HTML tags) always, as in
  // Hugging Face and transformers.js. transformers.js's default encode() is
  // {kRecognise, add_bos = true}.
  void encode_append(std::string_view text, std::vector<int32_t>& out,
                     const EncodeOptions& options) const override;
  // Text of every token through the file's decoder; special tokens give their text. Round trip:
  // decode(encode(s)) == s for any bytes s without "▁" (U+2581), which the decoder turns into a
  // space as Hugging Face does; bytes that are not UTF-8 come back via byte fallback.
  std::string decode(std::span<const int32_t> ids) const override;

  int32_t vocab_size() const override { return int32_t(tokens_.size()); }
  int32_t merge_count() const { return bpe_.merge_count(); }
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  // <eos> (Gemma), </s> (Llama) or <|endoftext|>, whichever the vocabulary has first.
  std::optional<int32_t> end_of_text_id() const override { return end_of_text_; }
  std::optional<int32_t> bos_id() const override { return bos_; }
  std::unique_ptr<Tokenizer> clone() const override {
    return std::make_unique<SentencePieceBpeTokenizer>(*this);
  }

 private:
  void encode_section(std::string_view text, std::vector<int32_t>& out) const;

  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t> id_of_token_;
  AddedTokenMatcher all_added_, ordinary_added_;  // with and without the special ones
  Normalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  TokenDecoder decoder_;
  PieceBpe bpe_;
  std::optional<int32_t> bos_, end_of_text_;
  std::string source_;
  mutable std::vector<std::string_view> words_;  // scratch
};

}  // namespace zaya
