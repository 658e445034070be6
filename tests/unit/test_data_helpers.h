// Shared helpers of the data tests: temporary directories, error capture, small prepared sources.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "core/error.h"
#include "data/prepare.h"
#include "test_util.h"

namespace zaya::test {

inline void write_text(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

// `docs` documents of varied length whose text encodes the source name and document number.
inline std::string synthetic_text(const std::string& tag, int docs) {
  std::string text;
  for (int d = 0; d < docs; ++d) {
    text += tag + " document " + std::to_string(d) + ":";
    for (int w = 0; w < 5 + (d * 7) % 23; ++w) text += " w" + std::to_string((d * 31 + w) % 97);
    text += "\n\n";
  }
  return text;
}

// Prepares source `name` under `dir` from synthetic text with the byte encoder.
inline PrepareSummary prepare_synthetic(const std::filesystem::path& dir, const std::string& name,
                                        int docs, int64_t shard_tokens, double val_fraction = 0.1) {
  const auto input = dir / (name + ".txt");
  write_text(input, synthetic_text(name, docs));
  PrepareOptions o;
  o.inputs = {input.string()};
  o.out_dir = dir.string();
  o.name = name;
  o.shard_tokens = shard_tokens;
  o.val_fraction = val_fraction;
  o.progress = false;
  return prepare_source(o, ByteEncoder());
}

}  // namespace zaya::test
