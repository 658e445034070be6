// Hugging Face config.json (Zyphra's zaya branch) -> ModelConfig: a hand-written config in the
// shape of the published ZAYA1 configs maps to the sizes derived by hand; fields zaya cannot honour
// are errors naming them; metadata passes; ignored math-adjacent fields warn.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/hf_config.h"
#include "test_util.h"

namespace zaya {
namespace {

using nlohmann::json;
using test::error_of;

// As tiny-random/zaya1's config.json is laid out (transformers 4.57.1, ZAYA1-base layout), with
// the sizes of configs/tiny.json: hidden 64 = 8 heads of 8, 4 query / 2 KV heads, 4 experts.
json zyphra_config() {
  return json::parse(R"({
    "activation_func": "swiglu", "activation_func_fp8_input_store": false,
    "add_bias_linear": false, "architectures": ["ZayaForCausalLM"], "attention_bias": false,
    "attention_dropout": 0.0, "bias_activation_fusion": true, "bos_token_id": 2, "cca": true,
    "cca_num_q_heads": [4, 0, 4, 0, 4, 0], "dtype": "bfloat16", "eos_token_id": 1,
    "ffn_hidden_size_list": [0, 32, 0, 32, 0, 32], "gated_linear_unit": true,
    "hidden_size": 64, "kv_channels": 8, "lm_head_bias": false,
    "max_position_embeddings": 32768, "model_type": "zaya", "moe_router_topk": 1,
    "norm_epsilon": 1e-05, "num_attention_heads": 8, "num_hidden_layers": 6,
    "num_key_value_heads": 2, "num_query_groups_list": [2, 0, 2, 0, 2, 0], "pad_token_id": 0,
    "partial_rotary_factor": 0.5, "residual_in_fp32": false, "rope_scaling": false,
    "rope_theta": 1000000, "scale_residual_merge": true, "sliding_window": null,
    "tie_word_embeddings": true, "transformers_version": "4.57.1", "use_cache": true,
    "vocab_size": 97, "zaya_layers": ["a", 4, "a", 4, "a", 4],
    "zaya_mlp_expansion": [0, 16, 0, 16, 0, 16], "zaya_use_eda": true, "zaya_use_mod": true})");
}

std::string error_for(const json& j) {
  return error_of([&] { model_config_from_hf(j, "m/config.json"); });
}

TEST(HfConfig, ReadsZyphrasLayout) {
  std::vector<std::string> warnings;
  const ModelConfig c = model_config_from_hf(zyphra_config(), "m/config.json", &warnings);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_stages, 6);
  EXPECT_EQ(c.head_dim, 8);  // 64 / 8 heads
  EXPECT_EQ(c.num_q_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.num_experts, 4);
  EXPECT_EQ(c.expert_hidden, 16);  // fc1 width 32 = gate + up
  EXPECT_EQ(c.router_dim, 16);
  EXPECT_EQ(c.vocab_size, 97);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.max_seq_len, 32768);
  EXPECT_EQ(c.router_norm_eps, 1e-6);  // Zyphra's default when layernorm_epsilon is absent
  EXPECT_EQ(c.eos_token_id, 1);
  // residual_in_fp32 = false is the one field zaya ignores here; the warning names it.
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("'residual_in_fp32'"), std::string::npos) << warnings[0];
}

TEST(HfConfig, ScalarVariantsOfOtherZyphraVersions) {
  json j = zyphra_config();
  j.erase("num_query_groups_list");
  j.erase("ffn_hidden_size_list");
  j["num_query_groups"] = 2;
  j["ffn_hidden_size"] = 32;
  j["zaya_mlp_expansion"] = 16;
  j["layernorm_epsilon"] = 1e-5;
  j["eos_token_id"] = {1, 106};
  std::vector<std::string> warnings;
  const ModelConfig c = model_config_from_hf(j, "m/config.json", &warnings);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.expert_hidden, 16);
  EXPECT_EQ(c.router_dim, 16);
  EXPECT_EQ(c.router_norm_eps, 1e-5);
  EXPECT_EQ(c.eos_token_id, 1);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("'eos_token_id'"), std::string::npos) << warnings[0];
}

TEST(HfConfig, ExportReadsBackToTheSameModelConfig) {
  const ModelConfig c = model_config_from_hf(zyphra_config(), "m/config.json");
  const json hf = hf_config_from_model(c, "bfloat16");
  EXPECT_EQ(hf["torch_dtype"], "bfloat16");
  EXPECT_EQ(hf["layernorm_epsilon"], 1e-6);
  std::vector<std::string> warnings;
  EXPECT_EQ(model_config_to_json(model_config_from_hf(hf, "x", &warnings)),
            model_config_to_json(c));
  EXPECT_TRUE(warnings.empty());
}

TEST(HfConfig, ErrorsNameTheField) {
  struct Case {
    const char* field;
    json value;
    const char* expected;
  };
  const Case cases[] = {
      {"model_type", "llama", "field 'model_type' must be \"zaya\", got \"llama\""},
      {"rope_scaling_typo", 1, "unknown field 'rope_scaling_typo'"},
      {"num_key_value_heads", 1, "field 'num_key_value_heads' (1)"},
      {"cca_num_q_heads", {2, 0, 2, 0, 2, 0}, "field 'cca_num_q_heads' (2)"},
      {"kv_channels", 128, "field 'kv_channels' (128)"},
      {"zaya_layers", {"a", 4, "a", 8, "a", 4}, "field 'zaya_layers' differs between stages"},
      {"zaya_layers", {4, "a", 4, "a", 4, "a"}, "field 'zaya_layers' entry 0"},
      {"num_query_groups_list", {2, 0, 1, 0, 2, 0}, "field 'num_query_groups_list' differs"},
      {"ffn_hidden_size_list", {0, 32, 0}, "field 'ffn_hidden_size_list' lists 3 values"},
      {"sliding_window", 128, "field 'sliding_window' = 128 is not supported"},
      {"rope_scaling", {{"rope_type", "linear"}, {"factor", 2}}, "field 'rope_scaling'"},
      {"zaya_use_eda", false, "field 'zaya_use_eda' = false is not supported"},
      {"tie_word_embeddings", false, "field 'tie_word_embeddings' = false"},
      {"moe_router_topk", 2, "field 'moe_router_topk' = 2"},
      {"hidden_size", "64", "field 'hidden_size' must be an integer"},
      {"rope_theta", "big", "field 'rope_theta' must be a number"},
  };
  for (const Case& k : cases) {
    json j = zyphra_config();
    j[k.field] = k.value;
    const std::string e = error_for(j);
    EXPECT_NE(e.find(k.expected), std::string::npos) << k.field << ": " << e;
    EXPECT_NE(e.find("m/config.json"), std::string::npos) << e;
  }
  json j = zyphra_config();
  j.erase("zaya_layers");  // e.g. upstream transformers' ZAYA1-8B layout
  EXPECT_NE(error_for(j).find("missing field 'zaya_layers'"), std::string::npos);
  j = zyphra_config();
  j.erase("num_query_groups_list");
  j.erase("num_key_value_heads");
  EXPECT_NE(error_for(j).find("missing field 'num_query_groups_list'"), std::string::npos);
}

TEST(HfConfig, MetadataPassesAndDropoutWarns) {
  json j = zyphra_config();
  j["torch_dtype"] = "float16";
  j["_name_or_path"] = "Zyphra/ZAYA1-base";
  j["num_hidden_layers"] = 120;
  j["attention_dropout"] = 0.1;
  j["residual_in_fp32"] = true;
  std::vector<std::string> warnings;
  EXPECT_NO_THROW(model_config_from_hf(j, "m/config.json", &warnings));
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("field 'num_hidden_layers' = 120 disagrees with 'zaya_layers', "
                             "which lists 6 stages"),
            std::string::npos)
      << warnings[0];
  EXPECT_NE(warnings[1].find("'attention_dropout'"), std::string::npos) << warnings[1];
}

}  // namespace
}  // namespace zaya
