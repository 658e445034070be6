// Inputs found by the fuzz targets (fuzz/, docs/fuzzing.md): each once crashed a parser (an
// exception other than zaya::Error, or a huge allocation) and must now be a zaya::Error.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "ckpt/checkpoint.h"
#include "core/error.h"
#include "data/checksum.h"
#include "eval/token_file.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "test_util.h"
#include "tokenizer/tokenizer_files.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;
using test::error_of;

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

std::string safetensors_with_header(std::string header) {
  while ((8 + header.size()) % 8) header.push_back(' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = char(uint64_t(header.size()) >> (8 * i));
  return out + header;
}

// nlohmann::json throws out_of_range (not parse_error) for a number beyond double: every reader
// caught only parse_error, so "1e400" in any JSON file ended the process.
TEST(FuzzRegressions, NumberOverflowInJsonIsAnError) {
  const fs::path dir = test::temp_dir("fuzz_overflow");
  const fs::path p = dir / "x.json";
  write_bytes(p, "[1e400]");
  EXPECT_NE(error_of([&] { read_json_file(p, "tokens file"); }).find("x.json"), std::string::npos);
  EXPECT_NE(error_of([&] { read_token_file(p); }).find("x.json"), std::string::npos);
  EXPECT_NE(error_of([&] { load_tokenizer(p); }).find("x.json"), std::string::npos);
  write_bytes(p, "{\"model\": {\"rope_theta\": 1e400}}");
  EXPECT_NE(error_of([&] { read_config_file(p); }).find("x.json"), std::string::npos);
  const fs::path st = dir / "x.safetensors";
  write_bytes(st, safetensors_with_header("{\"a\": 1e400}"));
  EXPECT_NE(error_of([&] { read_safetensors(st); }).find("x.safetensors"), std::string::npos);
}

// A safetensors header with a non-string dtype or a non-array shape threw json::type_error or
// read a number as a one-dimensional shape.
TEST(FuzzRegressions, SafetensorsFieldTypesAreChecked) {
  const fs::path p = test::temp_dir("fuzz_st") / "x.safetensors";
  write_bytes(
      p, safetensors_with_header(R"({"t": {"dtype": 1, "shape": [1], "data_offsets": [0, 0]}})"));
  EXPECT_NE(error_of([&] { read_safetensors(p); }).find("'dtype'"), std::string::npos);
  write_bytes(
      p, safetensors_with_header(R"({"t": {"dtype": "F32", "shape": 0, "data_offsets": [0, 0]}})"));
  EXPECT_NE(error_of([&] { read_safetensors(p); }).find("'shape'"), std::string::npos);
}

// Shape [2^61] of F64 needs 2^64 bytes, which wrapped to 0 and matched empty data_offsets: the
// reader then allocated a tensor of 2^61 elements.
TEST(FuzzRegressions, SafetensorsSizeCannotWrapAround) {
  const fs::path p = test::temp_dir("fuzz_wrap") / "x.safetensors";
  write_bytes(p, safetensors_with_header(R"({"t": {"dtype": "F64", "shape": [2305843009213693952],
                                                 "data_offsets": [0, 0]}})"));
  EXPECT_NE(error_of([&] { read_safetensors(p); }).find("needs 2305843009213693952 x 8 bytes"),
            std::string::npos);
}

// A manifest whose chunks tile a huge shape made load_checkpoint allocate the whole tensor before
// it looked at the chunks' stored data.
TEST(FuzzRegressions, CheckpointShapeIsCheckedAgainstTheChunksBeforeAllocating) {
  const fs::path dir = test::temp_dir("fuzz_ckpt");
  Tensor a({2}, DType::F32);
  a.data<float>()[0] = 1, a.data<float>()[1] = 2;
  write_safetensors((dir / checkpoint_rank_file(0)).string(), {{"p.a", a}});
  std::ifstream rf(dir / checkpoint_rank_file(0), std::ios::binary);
  const std::string rank((std::istreambuf_iterator<char>(rf)), std::istreambuf_iterator<char>());
  const std::string manifest =
      std::string(R"({"format": "zaya-sharded-checkpoint", "version": 1, "step": 1,
      "world_size": 1, "trainer": {"step": 1, "tokens_done": 0, "sample_index": 0,
      "optimizer_steps": 1, "balancer_steps": 1}, "rng": {"seed": 1}, "config": {},
      "files": [{"name": "rank-00000.safetensors", "bytes": )") +
      std::to_string(rank.size()) + R"(, "fnv1a64": ")" +
      checksum_hex(fnv1a64(rank.data(), rank.size())) + R"("}],
      "tensors": [{"name": "a", "dtype": "F32", "shape": [1000000000000],
        "chunks": [{"file": "rank-00000.safetensors", "key": "p.a", "begin": 0,
                    "end": 1000000000000}]}]})";
  write_bytes(dir / "manifest.json", manifest);
  write_bytes(dir / "COMPLETE", checksum_hex(fnv1a64(manifest.data(), manifest.size())) + "\n");
  EXPECT_NE(error_of([&] { load_checkpoint(dir.string()); }).find("1000000000000 elements"),
            std::string::npos);
}

}  // namespace
}  // namespace zaya
