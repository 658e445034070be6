// Reads a Hugging Face tokenizer.json of the SentencePiece kind (BPE over characters, byte
// fallback, a normalizer instead of a ByteLevel pre-tokenizer: Gemma-3) into a
// SentencePieceBpeTokenizer. Errors name the file and the field that zaya does not support.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace zaya {

// `j` is the parsed file at `path`, whose model is already known to be BPE.
std::unique_ptr<Tokenizer> load_sentencepiece_bpe_json(const nlohmann::json& j,
                                                       const std::string& path);

}  // namespace zaya
