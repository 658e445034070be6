// Config parsing and validation, safetensors, model directories: round trips and bad input.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors.h"
#include "io/text_file.h"
#include "model/config.h"
#include "model/hf_config.h"
#include "model/weights_io.h"
#include "test_util.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;

using test::temp_dir;

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

using test::error_of;

nlohmann::json tiny_json() {
  std::ifstream in(ZAYA_SOURCE_DIR "/configs/tiny.json");
  return nlohmann::json::parse(in);
}

TEST(Config, ErrorsNameTheFileAndField) {
  const fs::path dir = temp_dir("config");
  const fs::path p = dir / "c.json";
  write_file(p, "{\"model\": {");
  EXPECT_NE(error_of([&] { load_model_config(p); }).find("malformed JSON"), std::string::npos);

  auto j = tiny_json();
  j["model"]["hidden_sise"] = 3;
  write_file(p, j.dump());
  EXPECT_NE(error_of([&] { load_model_config(p); }).find("unknown field 'model.hidden_sise'"),
            std::string::npos);

  j = tiny_json();
  j["model"].erase("num_experts");
  write_file(p, j.dump());
  EXPECT_NE(
      error_of([&] { load_model_config(p); }).find("missing required field 'model.num_experts'"),
      std::string::npos);

  j = tiny_json();
  j["model"]["num_kv_heads"] = 3;
  write_file(p, j.dump());
  const std::string e = error_of([&] { load_model_config(p); });
  EXPECT_NE(e.find("'model.num_q_heads' (4) must be divisible by 'model.num_kv_heads' (3)"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find(p.string()), std::string::npos);

  j = tiny_json();
  j["model"]["num_stages"] = 5;
  write_file(p, j.dump());
  EXPECT_NE(error_of([&] { load_model_config(p); }).find("'model.num_stages' must be even"),
            std::string::npos);

  j = tiny_json();
  j["model"]["head_dim"] = "8";
  write_file(p, j.dump());
  EXPECT_NE(error_of([&] { load_model_config(p); }).find("'model.head_dim' must be an integer"),
            std::string::npos);
  fs::remove_all(dir);
}

TEST(HfConfig, RoundTripsAndRejectsWhatZayaCannotRun) {
  const ModelConfig c = load_model_config(ZAYA_SOURCE_DIR "/configs/zaya1-base.json");
  nlohmann::json hf = hf_config_from_model(c);
  EXPECT_EQ(hf["num_attention_heads"], 16);
  EXPECT_EQ(hf["zaya_layers"][1], 16);
  EXPECT_EQ(hf["ffn_hidden_size_list"][1], 4096);
  const ModelConfig back = model_config_from_hf(hf, "config.json");
  EXPECT_EQ(model_config_to_json(back), model_config_to_json(c));
  hf["model_type"] = "llama";
  EXPECT_NE(error_of([&] { model_config_from_hf(hf, "x/config.json"); }).find("'model_type'"),
            std::string::npos);
  hf = hf_config_from_model(c);
  hf["cca_num_q_heads"][2] = 4;
  EXPECT_NE(error_of([&] { model_config_from_hf(hf, "x"); }).find("differs between stages"),
            std::string::npos);
  hf = hf_config_from_model(c);
  hf["zaya_use_mod"] = false;
  EXPECT_NE(error_of([&] { model_config_from_hf(hf, "x"); }).find("'zaya_use_mod'"),
            std::string::npos);
}

TEST(Safetensors, RoundTripAndDamage) {
  const fs::path dir = temp_dir("st");
  Tensor a({2, 3}, DType::F32), b({5}, DType::BF16), c({2}, DType::I32);
  for (int i = 0; i < 6; ++i) a.data<float>()[i] = float(i) * 0.5f;
  for (int i = 0; i < 5; ++i) b.data<uint16_t>()[i] = f32_to_bf16(float(i));
  c.data<int32_t>()[1] = -7;
  const fs::path p = dir / "t.safetensors";
  write_safetensors(p, {{"a", a}, {"b", b}, {"c", c}}, {{"format", "pt"}});
  const SafetensorsFile f = read_safetensors(p);
  ASSERT_EQ(f.tensors.size(), 3u);
  EXPECT_EQ(f.metadata.at("format"), "pt");
  EXPECT_EQ(std::memcmp(f.tensors.at("a").raw(), a.raw(), a.nbytes()), 0);
  EXPECT_EQ(f.tensors.at("b").dtype(), DType::BF16);
  EXPECT_EQ(f.tensors.at("c").data<int32_t>()[1], -7);

  // Truncated: the error names the file and the tensor whose data is cut.
  fs::resize_file(p, fs::file_size(p) - 4);
  const std::string e = error_of([&] { read_safetensors(p); });
  EXPECT_NE(e.find(p.string()), std::string::npos) << e;
  EXPECT_NE(e.find("tensor 'c'"), std::string::npos) << e;
  // Not safetensors at all.
  write_file(p, "hello");
  EXPECT_NE(error_of([&] { read_safetensors(p); }).find("not a safetensors file"),
            std::string::npos);
  write_file(p, std::string("\xff\xff\xff\xff\x00\x00\x00\x00", 8) + "{}");
  EXPECT_NE(error_of([&] { read_safetensors(p); }).find("runs past the end"), std::string::npos);
  // A shape whose element count overflows names the file and the tensor (issue 31).
  const std::string header =
      R"({"w": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 0]}})";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[size_t(i)] = char((header.size() >> (8 * i)) & 0xff);
  write_file(p, bytes + header);
  const std::string overflow = error_of([&] { read_safetensors(p); });
  EXPECT_NE(overflow.find(p.string() + ": tensor 'w': shape [4611686018427387904, 4] has a "
                                       "negative dimension or more than 2^63 elements"),
            std::string::npos)
      << overflow;
  fs::remove_all(dir);
}

// Issue 31: a failed atomic write (here the rename onto a directory) leaves no .tmp behind, and a
// config path that is a directory is named as one.
TEST(TextFile, FailedAtomicWriteLeavesNoTmpAndADirectoryIsNoConfig) {
  const fs::path dir = temp_dir("atomic");
  fs::create_directories(dir / "taken" / "inside");
  const std::string e = error_of([&] { write_file_atomically((dir / "taken").string(), "x"); });
  EXPECT_NE(e.find("renaming '"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(dir / "taken.tmp"));
  const std::string c = error_of([&] { read_config_file(dir.string()); });
  EXPECT_NE(c.find("config file '" + dir.string() + "' is a directory"), std::string::npos) << c;
  fs::remove_all(dir);
}

TEST(ModelDir, SaveLoadIsBitwiseAndBadWeightsNameTheTensor) {
  const fs::path dir = temp_dir("modeldir");
  const ModelConfig c = load_model_config(ZAYA_SOURCE_DIR "/configs/tiny.json");
  ZayaModel m(c);
  m.params().init(3);
  save_model_dir(dir / "m", m);
  auto loaded = load_model_dir(dir / "m");
  ASSERT_EQ(loaded->params().size(), m.params().size());
  EXPECT_EQ(std::memcmp(loaded->params().weights(), m.params().weights(), m.params().size() * 4),
            0);

  // A tensor of the wrong shape / a missing tensor / an unexpected one: named in the error.
  const std::string name = "model.layers.2.self_attn.qkv.temp";
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& s : m.params().registry().specs())
    tensors.emplace_back(s.name,
                         s.name == name ? Tensor({3}, DType::F32) : m.params().weight(s.name));
  write_safetensors(dir / "m" / "model.safetensors", tensors);
  std::string e = error_of([&] { load_model_dir(dir / "m"); });
  EXPECT_NE(e.find("tensor '" + name + "' has shape [3], the config needs [2]"), std::string::npos)
      << e;
  tensors.erase(
      std::remove_if(tensors.begin(), tensors.end(), [&](auto& t) { return t.first == name; }),
      tensors.end());
  write_safetensors(dir / "m" / "model.safetensors", tensors);
  e = error_of([&] { load_model_dir(dir / "m"); });
  EXPECT_NE(e.find("missing tensor '" + name + "'"), std::string::npos) << e;
  tensors.emplace_back(name, m.params().weight(name));
  tensors.emplace_back("model.extra", Tensor({1}, DType::F32));
  write_safetensors(dir / "m" / "model.safetensors", tensors);
  e = error_of([&] { load_model_dir(dir / "m"); });
  EXPECT_NE(e.find("unexpected tensor 'model.extra'"), std::string::npos) << e;
  // bf16 weights load (converted), an I32 weight does not.
  tensors.pop_back();
  for (auto& [n, t] : tensors) t = t.to_dtype(DType::BF16);
  write_safetensors(dir / "m" / "model.safetensors", tensors);
  EXPECT_NO_THROW(load_model_dir(dir / "m"));
  tensors[0].second = Tensor(tensors[0].second.shape(), DType::I32);
  write_safetensors(dir / "m" / "model.safetensors", tensors);
  e = error_of([&] { load_model_dir(dir / "m"); });
  EXPECT_NE(e.find("has dtype I32"), std::string::npos) << e;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace zaya
