// Inputs found by the fuzz targets (fuzz/, docs/fuzzing.md): each once crashed a parser (an
// exception other than zaya::Error, or a huge allocation) and must now be a zaya::Error.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "core/error.h"
#include "data/checksum.h"
#include "eval/token_file.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "model/hf_config.h"
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

// A checkpoint directory with one rank file (p.a, two floats) and `manifest` (where $BYTES and
// $SUM stand for the rank file's size and checksum), its COMPLETE marker matching.
std::string checkpoint_with_manifest(const std::string& name, std::string manifest) {
  const fs::path dir = test::temp_dir(name);
  Tensor a({2}, DType::F32);
  a.data<float>()[0] = 1, a.data<float>()[1] = 2;
  write_safetensors((dir / checkpoint_rank_file(0)).string(), {{"p.a", a}});
  std::ifstream rf(dir / checkpoint_rank_file(0), std::ios::binary);
  const std::string rank((std::istreambuf_iterator<char>(rf)), std::istreambuf_iterator<char>());
  const auto put = [&](const std::string& key, const std::string& value) {
    manifest.replace(manifest.find(key), key.size(), value);
  };
  put("$BYTES", std::to_string(rank.size()));
  put("$SUM", checksum_hex(fnv1a64(rank.data(), rank.size())));
  write_bytes(dir / "manifest.json", manifest);
  write_bytes(dir / "COMPLETE", checksum_hex(fnv1a64(manifest.data(), manifest.size())) + "\n");
  return dir.string();
}

std::string manifest_text(const std::string& format, const std::string& world,
                          const std::string& shape, const std::string& end) {
  return R"({"format": )" + format + R"(, "version": 1, "step": 1, "world_size": )" + world +
         R"(, "trainer": {"step": 1, "tokens_done": 0, "sample_index": 0, "optimizer_steps": 1,
         "balancer_steps": 1}, "rng": {"seed": 1}, "config": {},
         "files": [{"name": "rank-00000.safetensors", "bytes": $BYTES, "fnv1a64": "$SUM"}],
         "tensors": [{"name": "a", "dtype": "F32", "shape": )" +
         shape + R"(, "chunks": [{"file": "rank-00000.safetensors", "key": "p.a", "begin": 0,
         "end": )" +
         end + "}]}]}";
}

// A manifest whose chunks tile a huge shape made load_checkpoint allocate the whole tensor before
// it looked at the chunks' stored data.
TEST(FuzzRegressions, CheckpointShapeIsCheckedAgainstTheChunksBeforeAllocating) {
  const std::string fmt = "\"zaya-sharded-checkpoint\"";
  EXPECT_EQ(error_of([&] {
              load_checkpoint(
                  checkpoint_with_manifest("fuzz_ckpt_ok", manifest_text(fmt, "1", "[2]", "2")));
            }),
            "");
  const std::string dir = checkpoint_with_manifest(
      "fuzz_ckpt_huge", manifest_text(fmt, "1", "[1000000000000]", "1000000000000"));
  EXPECT_NE(error_of([&] { load_checkpoint(dir); }).find("1000000000000 elements"),
            std::string::npos);
}

// 'format' as a number threw json::type_error (value<string>()); world_size 2^32 + 1 passed as 1.
TEST(FuzzRegressions, CheckpointManifestTypesAndRanges) {
  const std::string fmt = "\"zaya-sharded-checkpoint\"";
  EXPECT_NE(error_of([&] {
              load_checkpoint(
                  checkpoint_with_manifest("fuzz_ckpt_fmt", manifest_text("7", "1", "[2]", "2")));
            }).find("'format'"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              load_checkpoint(checkpoint_with_manifest(
                  "fuzz_ckpt_world", manifest_text(fmt, "4294967297", "[2]", "2")));
            }).find("'world_size'"),
            std::string::npos);
}

// rope_scaling {"type": 1} threw json::type_error from value<string>().
TEST(FuzzRegressions, HfRopeScalingOfAnyTypeIsAnError) {
  std::ifstream in(ZAYA_SOURCE_DIR "/fuzz/corpus/hf_config/tiny_config.json");
  nlohmann::json j = nlohmann::json::parse(in);
  j["rope_scaling"] = {{"type", 1}};
  EXPECT_NE(error_of([&] { model_config_from_hf(j, "config.json"); }).find("rope_scaling"),
            std::string::npos);
  j["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_EQ(error_of([&] { model_config_from_hf(j, "config.json"); }), "");
}

// A Split pre_tokenizer (or Replace normalizer / decoder step) without "pattern" read j["pattern"]
// of a const object: nlohmann dereferences the map's end, a heap-use-after-free under ASan.
TEST(FuzzRegressions, TokenizerStepWithoutPatternIsAnError) {
  std::ifstream in(ZAYA_SOURCE_DIR "/fuzz/corpus/tokenizer_json/gemma3_600.json");
  const nlohmann::json gemma = nlohmann::json::parse(in);
  const fs::path p = test::temp_dir("fuzz_tok") / "tokenizer.json";
  write_bytes(p, gemma.dump());
  EXPECT_EQ(error_of([&] { load_tokenizer(p.string()); }), "");
  for (const char* part : {"pre_tokenizer", "normalizer"}) {
    nlohmann::json j = gemma;
    j[part].erase("pattern");
    write_bytes(p, j.dump());
    EXPECT_NE(error_of([&] { load_tokenizer(p.string()); }).find(".pattern"), std::string::npos)
        << part;
  }
}

}  // namespace
}  // namespace zaya
