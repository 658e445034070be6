// zaya's side of the comparisons with JavaScript tokenizers: reads a JSON array on stdin whose
// items are strings or {"hex": "..."} (any bytes, e.g. invalid UTF-8) and prints a JSON array of
// their token ids, encoded by the tokenizer at TOKENIZER.
//   --special  recognise special tokens' text (SpecialTokens::kRecognise)
//   --bos      put the beginning-of-sequence token first
//   --decode   print {"ids": [...], "decoded_hex": "..."} per item: the decoded ids (after the
//              beginning-of-sequence token) as hex bytes, for round-trip checks
#include <cstdio>
#include <iostream>
#include <iterator>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/tokenizer_files.h"

namespace {

std::string hex_to_bytes(const std::string& hex) {
  ZAYA_CHECK(hex.size() % 2 == 0, "hex item \"", hex, "\" has an odd length");
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) out += char(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

std::string bytes_to_hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (const char c : bytes) out += digits[uint8_t(c) >> 4], out += digits[uint8_t(c) & 15];
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path;
  zaya::EncodeOptions options;
  bool decode = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--special") {
      options.specials = zaya::SpecialTokens::kRecognise;
    } else if (arg == "--bos") {
      options.add_bos = true;
    } else if (arg == "--decode") {
      decode = true;
    } else {
      path = arg;
    }
  }
  if (path.empty()) {
    std::fprintf(stderr, "usage: %s [--special] [--bos] [--decode] TOKENIZER < strings.json\n",
                 argv[0]);
    return 2;
  }
  try {
    const auto tok = zaya::load_tokenizer(path);
    const std::string input{std::istreambuf_iterator<char>(std::cin), {}};
    nlohmann::json out = nlohmann::json::array();
    for (const auto& item : nlohmann::json::parse(input)) {
      const std::string text = item.is_string() ? item.get<std::string>()
                                                : hex_to_bytes(item.at("hex").get<std::string>());
      const std::vector<int32_t> ids = tok->encode(text, options);
      if (decode) {
        const auto text_ids = std::span(ids).subspan(options.add_bos ? 1 : 0);
        out.push_back({{"ids", ids}, {"decoded_hex", bytes_to_hex(tok->decode(text_ids))}});
      } else {
        out.push_back(ids);
      }
    }
    std::printf("%s\n", out.dump().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "encode_strings: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
