#include "tokenizer/sentencepiece_tokenizer.h"

#include "core/error.h"

namespace zaya {

SentencePieceBpeTokenizer::SentencePieceBpeTokenizer(SentencePieceBpeParts parts,
                                                     PieceBpeSpec model)
    : tokens_(std::move(parts.tokens)),
      normalizer_(std::move(parts.normalizer)),
      pre_tokenizer_(std::move(parts.pre_tokenizer)),
      decoder_(std::move(parts.decoder)),
      bpe_(model),
      bos_(parts.bos_id),
      source_(std::move(parts.source)) {
  id_of_token_ = std::move(model.id_of_piece);
  for (const AddedTokenEntry& t : parts.added) {
    ZAYA_CHECK(t.id >= 0 && t.id < vocab_size(), source_, ": added token \"", t.content, "\" id ",
               t.id, " is outside the vocabulary");
    id_of_token_[t.content] = t.id;  // an added token's id wins, as in transformers.js
    all_added_.add(t.content, t.id);
    if (!t.special) ordinary_added_.add(t.content, t.id);
  }
  if (bos_) {
    ZAYA_CHECK(*bos_ >= 0 && *bos_ < vocab_size(), source_, ": bos id ", *bos_,
               " is outside the vocabulary");
  }
  for (const char* name : {"<eos>", "</s>", "<|endoftext|>"}) {
    if (const auto id = token_to_id(name)) {
      end_of_text_ = id;
      break;
    }
  }
}

void SentencePieceBpeTokenizer::encode_append(std::string_view text, std::vector<int32_t>& out,
                                              const EncodeOptions& options) const {
  if (options.add_bos) {
    ZAYA_CHECK(bos_.has_value(), source_,
               ": no beginning-of-sequence token (its post_processor adds none) to add");
    out.push_back(*bos_);
  }
  const AddedTokenMatcher& added =
      options.specials == SpecialTokens::kRecognise ? all_added_ : ordinary_added_;
  size_t from = 0;
  while (from < text.size()) {
    const AddedTokenMatcher::Match m = added.find(text, from);
    if (m.id < 0) break;
    encode_section(text.substr(from, m.pos - from), out);
    out.push_back(m.id);
    from = m.pos + m.length;
  }
  encode_section(text.substr(from), out);
}

void SentencePieceBpeTokenizer::encode_section(std::string_view text,
                                               std::vector<int32_t>& out) const {
  if (text.empty()) return;
  const std::string normalized = normalizer_.apply(text);
  words_.clear();
  pre_tokenizer_.split(normalized, words_);
  bpe_.encode_words(words_, out);
}

std::string SentencePieceBpeTokenizer::decode(std::span<const int32_t> ids) const {
  std::vector<std::string> texts;
  texts.reserve(ids.size());
  for (const int32_t id : ids) {
    ZAYA_CHECK(id >= 0 && id < vocab_size(), "token id ", id, " is outside the vocabulary [0, ",
               vocab_size(), ") of ", source_);
    texts.push_back(tokens_[id]);
  }
  return decoder_.decode(std::move(texts));
}

std::optional<int32_t> SentencePieceBpeTokenizer::token_to_id(std::string_view token) const {
  const auto it = id_of_token_.find(std::string(token));
  if (it == id_of_token_.end()) return std::nullopt;
  return it->second;
}

}  // namespace zaya
