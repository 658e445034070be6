// The one interface the data pipeline needs from a tokenizer: text in, token ids out, plus the
// vocabulary size (to pick the shard dtype and validate ids) and the end-of-sequence id (the
// document separator inside shards). The real tokenizer is adapted to this interface in
// make_text_encoder(), the single place that maps a --tokenizer argument to an encoder.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace zaya {

struct TextEncoder {
  virtual ~TextEncoder() = default;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int32_t eos_id() const = 0;
  // An independent copy for another thread (tokenizers cache per object and are not
  // thread-safe); made while no other thread encodes with this one.
  virtual std::unique_ptr<TextEncoder> clone() const = 0;
};

// Each byte is its own token (0..255); eos is 256, so the vocabulary has 257 entries. Lossless
// for any input, which makes it the encoder of choice for tests.
struct ByteEncoder final : TextEncoder {
  static constexpr int32_t kEos = 256;
  std::vector<int32_t> encode(std::string_view text) const override;
  int64_t vocab_size() const override { return 257; }
  int32_t eos_id() const override { return kEos; }
  std::unique_ptr<TextEncoder> clone() const override { return std::make_unique<ByteEncoder>(); }
};

// "bytes" selects ByteEncoder; anything else is loaded by load_tokenizer (a tokenizer.json of
// byte-level or Gemma-3 style BPE, or GPT-2's files) and documents end with its end-of-text id.
std::unique_ptr<TextEncoder> make_text_encoder(const std::string& spec);

}  // namespace zaya
