// Tokenizer files: Hugging Face tokenizer.json to read (byte-level BPE as GPT-2, or
// SentencePiece-style BPE with byte fallback as Gemma-3) and write (byte-level), and GPT-2's
// encoder.json + vocab.bpe to read.
#pragma once

#include <memory>
#include <string>

#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace zaya {

// A tokenizer.json file, or a directory holding tokenizer.json or encoder.json + vocab.bpe.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

// A ByteLevel pre_tokenizer makes a byte-level BpeTokenizer; any other file is read as
// SentencePiece-style BPE (hf_sentencepiece_json.h). Errors name the file and field: unsupported
// model types, pre-tokenizers, normalizers or decoders, tokens outside the byte-level alphabet,
// merges of unknown tokens, missing or repeated ids.
std::unique_ptr<Tokenizer> load_hf_tokenizer_json(const std::string& path);

// GPT-2's files: encoder.json maps byte-level tokens to ids, vocab.bpe lists merges by rank after a
// "#version" line. "<|endoftext|>" becomes a special token.
BpeTokenizer load_gpt2_tokenizer(const std::string& encoder_json, const std::string& vocab_bpe);

// Writes a Hugging Face tokenizer.json (BPE model, ByteLevel pre-tokenizer and decoder, special
// tokens as added_tokens) that load_hf_tokenizer_json and Hugging Face's tokenizers read back.
void save_hf_tokenizer_json(const BpeTokenizer& tokenizer, const std::string& path);

}  // namespace zaya
