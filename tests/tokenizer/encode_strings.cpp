// zaya's side of the comparison with gpt-3-encoder: reads a JSON array of strings on stdin and
// prints a JSON array of their token ids, encoded by the tokenizer at argv[1].
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/tokenizer_files.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s TOKENIZER < strings.json\n", argv[0]);
    return 2;
  }
  try {
    const zaya::BpeTokenizer tok = zaya::load_tokenizer(argv[1]);
    const std::string input{std::istreambuf_iterator<char>(std::cin), {}};
    nlohmann::json out = nlohmann::json::array();
    for (const auto& s : nlohmann::json::parse(input))
      out.push_back(tok.encode(s.get<std::string>()));
    std::printf("%s\n", out.dump().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "encode_strings: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
