#include "data/text_encoder.h"

#include "tokenizer/tokenizer_files.h"

#include "core/error.h"

namespace zaya {

namespace {

class TokenizerTextEncoder final : public TextEncoder {
 public:
  TokenizerTextEncoder(std::unique_ptr<Tokenizer> tok, const std::string& path)
      : tok_(std::move(tok)), path_(path) {
    const auto eos = tok_->end_of_text_id();
    ZAYA_CHECK(eos.has_value(), path, ": the tokenizer has no end-of-text token (<|endoftext|> ",
               "or <eos>) to separate documents (zaya tokenizer train adds one)");
    eos_ = *eos;
  }
  std::vector<int32_t> encode(std::string_view text) const override { return tok_->encode(text); }
  int64_t vocab_size() const override { return tok_->vocab_size(); }
  int32_t eos_id() const override { return eos_; }
  std::unique_ptr<TextEncoder> clone() const override {
    return std::make_unique<TokenizerTextEncoder>(tok_->clone(), path_);
  }

 private:
  std::unique_ptr<Tokenizer> tok_;
  std::string path_;
  int32_t eos_ = 0;
};

}  // namespace

std::vector<int32_t> ByteEncoder::encode(std::string_view text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = int32_t(uint8_t(text[i]));
  return ids;
}

std::unique_ptr<TextEncoder> make_text_encoder(const std::string& spec) {
  if (spec == "bytes") return std::make_unique<ByteEncoder>();
  // A tokenizer.json (or GPT-2 encoder.json + vocab.bpe directory); documents end with its
  // <|endoftext|> token.
  try {
    return std::make_unique<TokenizerTextEncoder>(load_tokenizer(spec), spec);
  } catch (const Error& e) {
    ZAYA_FAIL("--tokenizer '", spec, "': ", e.what(), " (expected 'bytes', a tokenizer.json, or a ",
              "directory with encoder.json + vocab.bpe)");
  }
}

}  // namespace zaya
