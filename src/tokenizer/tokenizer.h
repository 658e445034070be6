// What zaya needs of a tokenizer, whatever its kind: text to ids and back, the vocabulary size and
// the ids that frame documents. load_tokenizer (tokenizer_files.h) picks the implementation from
// the file: byte-level BPE (GPT-2 style, BpeTokenizer) or SentencePiece-style BPE over characters
// with byte fallback (Gemma-3, SentencePieceBpeTokenizer).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace zaya {

// Whether encode() turns the text of special tokens (e.g. "<|endoftext|>", "<eos>") into their
// ids. kAsText (the default, as GPT-2's encoder) encodes it like any other text, so documents that
// happen to contain such text cannot forge control tokens. Added tokens that are not special (e.g.
// Gemma's runs of newlines) are part of ordinary text and always recognised.
enum class SpecialTokens { kAsText, kRecognise };

struct EncodeOptions {
  SpecialTokens specials = SpecialTokens::kAsText;
  // Put the beginning-of-sequence token first, as the file's post_processor does by default in
  // Hugging Face and transformers.js (Gemma: <bos>). An error for a tokenizer without one.
  bool add_bos = false;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Not thread-safe: implementations cache word encodings. Use one tokenizer per thread.
  virtual void encode_append(std::string_view text, std::vector<int32_t>& out,
                             const EncodeOptions& options) const = 0;
  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options = {}) const {
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 2);
    encode_append(text, out, options);
    return out;
  }
  // Raw bytes: decode(encode(text)) == text for any bytes the tokenizer round-trips (see the
  // implementation). Throws on an id outside the vocabulary.
  virtual std::string decode(std::span<const int32_t> ids) const = 0;

  virtual int32_t vocab_size() const = 0;
  // The id of a token given as its text (raw bytes), added and special tokens included.
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  // The token that ends a document in training data (<|endoftext|>, Gemma's <eos>).
  virtual std::optional<int32_t> end_of_text_id() const = 0;
  virtual std::optional<int32_t> bos_id() const = 0;
  // An independent copy for another thread: the vocabulary copied in memory (a fraction of what
  // loading its file costs: Gemma-3's takes seconds to parse). Not thread-safe either: it reads
  // this tokenizer's caches, so no other thread may encode with this one meanwhile.
  virtual std::unique_ptr<Tokenizer> clone() const = 0;
};

}  // namespace zaya
