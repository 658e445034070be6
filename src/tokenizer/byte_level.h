// GPT-2's byte-level alphabet: each of the 256 byte values is shown as one printable Unicode
// character (printable Latin-1 bytes as themselves, the rest as U+0100 onwards, so a space is
// "Ġ"). Vocabulary files (encoder.json, vocab.bpe, tokenizer.json) store tokens in this alphabet;
// zaya keeps tokens as raw bytes and converts only at the file boundary.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace zaya {

// Raw bytes -> UTF-8 text in the byte-level alphabet.
std::string bytes_to_byte_level(std::string_view bytes);

// UTF-8 text in the byte-level alphabet -> raw bytes; nullopt when `text` holds a character outside
// the alphabet (or is not UTF-8).
std::optional<std::string> byte_level_to_bytes(std::string_view text);

}  // namespace zaya
