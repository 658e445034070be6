// HF model directories: export -> load is bitwise (weights and logits), single file and sharded;
// bf16 export rounds to nearest even and keeps the balancing biases fp32; F16/BF16 files written
// by hand load as the values their bits encode; bad directories are errors naming file and tensor.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "model/weights_io.h"
#include "test_util.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::error_of;
using test::tiny_config;

std::unique_ptr<ZayaModel> random_model(uint64_t seed) {
  auto m = std::make_unique<ZayaModel>(tiny_config());
  m->params().init(seed);
  // Every element distinct from its init pattern, so a mixed-up tensor cannot go unnoticed (the
  // alignment padding between tensors stays zero: it belongs to no tensor, model/params.h).
  for (const ParamSpec& spec : m->params().registry().specs())
    for (size_t i = spec.offset; i < spec.offset + size_t(spec.numel); ++i)
      m->params().weights()[i] += float(int(i * 2654435761u % 1000) - 500) * 1e-5f;
  return m;
}

bool same_weights(const ZayaModel& a, const ZayaModel& b) {
  return a.params().size() == b.params().size() &&
         std::memcmp(a.params().weights(), b.params().weights(), a.params().size() * 4) == 0;
}

std::vector<float> logits_of(ZayaModel& m) {
  const std::vector<int32_t> tokens = {2, 17, 5, 96, 40, 3, 3, 81};
  m.forward(tokens, {}, 2, 4);
  return {m.logits().begin(), m.logits().end()};
}

TEST(HfWeights, SingleFileRoundTripIsBitwise) {
  const fs::path dir = test::temp_dir("hf_single");
  auto m = random_model(4);
  save_model_dir(dir, *m);
  EXPECT_TRUE(fs::exists(dir / "model.safetensors"));
  auto back = load_model_dir(dir);
  EXPECT_TRUE(same_weights(*m, *back));
  EXPECT_EQ(logits_of(*m), logits_of(*back));
  fs::remove_all(dir);
}

TEST(HfWeights, ShardedRoundTripIsBitwiseAndTheIndexListsEveryTensor) {
  const fs::path dir = test::temp_dir("hf_sharded");
  auto m = random_model(5);
  save_model_dir(dir, *m);  // a single-file save first: the sharded one must replace it
  HfWriteOptions opt;
  opt.max_shard_bytes = 40000;
  save_model_dir(dir, *m, opt);
  EXPECT_FALSE(fs::exists(dir / "model.safetensors"));
  std::ifstream in(dir / "model.safetensors.index.json");
  const json index = json::parse(in);
  std::set<std::string> files;
  uint64_t total = 0;
  for (const ParamSpec& s : m->params().registry().specs()) {
    ASSERT_TRUE(index["weight_map"].contains(s.name)) << s.name;
    files.insert(index["weight_map"][s.name].get<std::string>());
    total += uint64_t(s.numel) * 4;
  }
  EXPECT_EQ(index["weight_map"].size(), m->params().registry().specs().size());
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), total);
  // 286 KB of fp32 weights in shards of at most 40 KB (one tensor, the 24.8 KB embedding, alone).
  EXPECT_GE(files.size(), total / 40000);
  for (const std::string& f : files) {
    EXPECT_TRUE(fs::exists(dir / f)) << f;
    EXPECT_LE(fs::file_size(dir / f), 40000u + 8192u) << f;  // + header
  }
  auto back = load_model_dir(dir);
  EXPECT_TRUE(same_weights(*m, *back));
  EXPECT_EQ(logits_of(*m), logits_of(*back));

  // A missing shard: the error names the shard and the tensors it holds.
  const std::string gone = *files.rbegin();
  fs::remove(dir / gone);
  const std::string e = error_of([&] { load_model_dir(dir); });
  EXPECT_NE(e.find("shard '" + gone + "' is missing"), std::string::npos) << e;
  EXPECT_NE(e.find("model.final_norm.weight"), std::string::npos) << e;  // the last tensor
  // Saving single-file again removes the index and the remaining shards.
  save_model_dir(dir, *m);
  EXPECT_FALSE(fs::exists(dir / "model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(dir / *files.begin()));
  fs::remove_all(dir);
}

// Round to nearest even, written out independently of the library's converter.
uint16_t bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t lsb = (u >> 16) & 1u;
  return uint16_t((u + 0x7fffu + lsb) >> 16);
}

TEST(HfWeights, Bf16ExportRoundsAndKeepsBalancingBiasesF32) {
  const fs::path dir = test::temp_dir("hf_bf16");
  auto m = random_model(6);
  HfWriteOptions opt;
  opt.dtype = DType::BF16;
  save_model_dir(dir, *m, opt);
  const SafetensorsFile f = read_safetensors(dir / "model.safetensors");
  for (const ParamSpec& s : m->params().registry().specs()) {
    const Tensor& t = f.tensors.at(s.name);
    const float* w = m->params().weights() + s.offset;
    if (s.name.ends_with("balancing_biases")) {
      ASSERT_EQ(t.dtype(), DType::F32) << s.name;
      EXPECT_EQ(std::memcmp(t.raw(), w, size_t(s.numel) * 4), 0) << s.name;
      continue;
    }
    ASSERT_EQ(t.dtype(), DType::BF16) << s.name;
    for (int64_t k = 0; k < s.numel; ++k)
      ASSERT_EQ(t.data<uint16_t>()[k], bf16_bits(w[k])) << s.name << "[" << k << "]";
  }
  std::ifstream in(dir / "config.json");
  EXPECT_EQ(json::parse(in)["torch_dtype"], "bfloat16");
  // And it loads back as the rounded values.
  auto back = load_model_dir(dir);
  const float emb0 = back->params().weight("model.embed_tokens.weight").data<float>()[0];
  uint32_t bits;
  std::memcpy(&bits, &emb0, 4);
  EXPECT_EQ(bits, uint32_t(bf16_bits(m->params().weights()[0])) << 16);
  fs::remove_all(dir);
}

// A safetensors file built byte by byte: (name, dtype, shape, raw little-endian bytes).
struct RawTensor {
  std::string name, dtype;
  Shape shape;
  std::string bytes;
};

void write_raw_safetensors(const fs::path& path, const std::vector<RawTensor>& tensors) {
  json header = json::object();
  std::string data;
  for (const RawTensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  const std::string h = header.dump();
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) len[size_t(i)] = char((h.size() >> (8 * i)) & 0xff);
  std::ofstream(path, std::ios::binary) << len << h << data;
}

TEST(HfWeights, F16AndBf16TensorsLoadAsTheValuesTheirBitsEncode) {
  const fs::path dir = test::temp_dir("hf_f16");
  auto m = random_model(7);
  save_model_dir(dir, *m);  // for config.json
  // F16 bit patterns and their values: 1, -2, 1/3 rounded, 0.1 rounded, the largest finite, the
  // smallest subnormal (2^-24), the largest subnormal (1023 · 2^-24), -0.
  const std::pair<uint16_t, float> f16[] = {{0x3C00, 1.0f},
                                            {0xC000, -2.0f},
                                            {0x3555, 0.333251953125f},
                                            {0x2E66, 0.0999755859375f},
                                            {0x7BFF, 65504.0f},
                                            {0x0001, 5.9604644775390625e-08f},
                                            {0x03FF, 6.0975551605224609e-05f},
                                            {0x8000, -0.0f}};
  // BF16 bit patterns and their values.
  const std::pair<uint16_t, float> bf16[] = {
      {0x3F80, 1.0f}, {0xC040, -3.0f}, {0x3E2A, 0.166015625f}};
  std::vector<RawTensor> raw;
  for (const ParamSpec& s : m->params().registry().specs()) {
    const bool use_bf16 = s.name == "model.embed_tokens.weight";
    RawTensor t{s.name, use_bf16 ? "BF16" : "F16", s.shape, {}};
    for (int64_t k = 0; k < s.numel; ++k) {
      const uint16_t bits = use_bf16 ? bf16[k % 3].first : f16[k % 8].first;
      t.bytes += char(bits & 0xff);
      t.bytes += char(bits >> 8);
    }
    raw.push_back(t);
  }
  write_raw_safetensors(dir / "model.safetensors", raw);
  auto back = load_model_dir(dir);
  for (const ParamSpec& s : back->params().registry().specs()) {
    const float* w = back->params().weights() + s.offset;
    const bool use_bf16 = s.name == "model.embed_tokens.weight";
    for (int64_t k = 0; k < s.numel; ++k) {
      const float want = use_bf16 ? bf16[k % 3].second : f16[k % 8].second;
      ASSERT_EQ(std::memcmp(&w[k], &want, 4), 0) << s.name << "[" << k << "] = " << w[k];
    }
  }
  fs::remove_all(dir);
}

TEST(HfWeights, BadDirectoriesNameTheFileAndTensor) {
  const fs::path dir = test::temp_dir("hf_bad");
  auto m = random_model(8);
  save_model_dir(dir, *m);
  // Another model type.
  std::ifstream in(dir / "config.json");
  json cfg = json::parse(in);
  in.close();
  cfg["model_type"] = "llama";
  std::ofstream(dir / "config.json") << cfg.dump();
  std::string e = error_of([&] { load_model_dir(dir); });
  EXPECT_NE(e.find((dir / "config.json").string()), std::string::npos) << e;
  EXPECT_NE(e.find("'model_type' must be \"zaya\", got \"llama\""), std::string::npos) << e;
  // No weights at all.
  save_model_dir(dir, *m);
  fs::remove(dir / "model.safetensors");
  e = error_of([&] { load_model_dir(dir); });
  EXPECT_NE(e.find("no weights"), std::string::npos) << e;
  // An index naming a shard that holds no such tensor.
  HfWriteOptions opt;
  opt.max_shard_bytes = 100000;
  save_model_dir(dir, *m, opt);
  std::ifstream ii(dir / "model.safetensors.index.json");
  json index = json::parse(ii);
  ii.close();
  const std::string moved = "model.final_norm.weight";
  const std::string other = index["weight_map"]["model.embed_tokens.weight"];
  ASSERT_NE(index["weight_map"][moved], other);
  index["weight_map"][moved] = other;
  std::ofstream(dir / "model.safetensors.index.json") << index.dump();
  e = error_of([&] { load_model_dir(dir); });
  EXPECT_NE(e.find("lacks tensor '" + moved + "'"), std::string::npos) << e;
  fs::remove_all(dir);
}

TEST(HfWeights, ShardSizeSpellings) {
  EXPECT_EQ(parse_hf_size("5GB", "--max-shard-size"), 5000000000u);
  EXPECT_EQ(parse_hf_size("200mb", "--max-shard-size"), 200000000u);
  EXPECT_EQ(parse_hf_size("64MiB", "--max-shard-size"), 64u << 20);
  EXPECT_EQ(parse_hf_size("1000", "--max-shard-size"), 1000u);
  for (const char* bad : {"", "GB", "5XB", "-1GB", "0"})
    EXPECT_NE(error_of([&] { parse_hf_size(bad, "--max-shard-size"); }).find("--max-shard-size"),
              std::string::npos)
        << bad;
}

}  // namespace
}  // namespace zaya
