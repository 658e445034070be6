#include "data/text_encoder.h"

#include "core/error.h"

namespace zaya {

std::vector<int32_t> ByteEncoder::encode(std::string_view text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = int32_t(uint8_t(text[i]));
  return ids;
}

std::unique_ptr<TextEncoder> make_text_encoder(const std::string& spec) {
  if (spec == "bytes") return std::make_unique<ByteEncoder>();
  // TODO(tokenizer): load a tokenizer.json from `spec` and wrap it in a TextEncoder adapter.
  ZAYA_FAIL("--tokenizer '", spec,
            "': unsupported tokenizer; expected 'bytes' (byte-level encoder, vocab 257). Loading a "
            "tokenizer.json arrives with the tokenizer work");
}

}  // namespace zaya
