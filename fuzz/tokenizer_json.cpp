// Hugging Face tokenizer.json: load_tokenizer picks byte-level BPE (ByteLevel pre_tokenizer) or
// SentencePiece-style BPE. A tokenizer that loads is then used: encode and decode a few texts,
// since a file can be accepted yet leave tables an encoder trips over.
#include <vector>

#include "fuzz_util.h"
#include "tokenizer/tokenizer_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = zaya::fuzz::write_input("tokenizer.json", data, size);
  std::unique_ptr<zaya::Tokenizer> tok;
  ZAYA_FUZZ_EXPECT_ERRORS(tok = zaya::load_tokenizer(path));
  if (!tok) return 0;
  static const char* const kTexts[] = {"Hello, world! It's 2026.", " \n\t  x", "héllo wörld ✓ 日本",
                                       "<|endoftext|><bos>a", "\xff\xfe bytes"};
  ZAYA_FUZZ_EXPECT_ERRORS({
    for (const char* text : kTexts) {
      for (const auto specials : {zaya::SpecialTokens::kAsText, zaya::SpecialTokens::kRecognise}) {
        std::vector<int32_t> ids;
        tok->encode_append(text, ids, {specials, false});
        tok->decode(ids);
      }
    }
    tok->vocab_size();
    tok->end_of_text_id();
    tok->bos_id();
  });
  return 0;
}
