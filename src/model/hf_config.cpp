#include "model/hf_config.h"

#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace zaya {

using nlohmann::json;

json hf_config_from_model(const ModelConfig& c) {
  ZAYA_CHECK(c.hidden_size == 2 * c.num_q_heads * c.head_dim, "config.json export: Zyphra's code ",
             "derives head_dim = hidden_size / num_attention_heads with num_attention_heads = 2 × ",
             "num_q_heads, so it needs hidden_size (", c.hidden_size, ") = 2 × num_q_heads × ",
             "head_dim (", 2 * c.num_q_heads * c.head_dim, ")");
  json layers = json::array(), q_heads = json::array(), groups = json::array(), ffn = json::array(),
       mlp = json::array();
  for (int64_t i = 0; i < c.num_stages; ++i) {
    const bool attn = ModelConfig::is_attention_stage(i);
    if (attn)
      layers.push_back("a");
    else
      layers.push_back(c.num_experts);
    q_heads.push_back(attn ? c.num_q_heads : 0);
    groups.push_back(attn ? c.num_kv_heads : 0);
    ffn.push_back(attn ? 0 : 2 * c.expert_hidden);
    mlp.push_back(attn ? 0 : c.router_dim);
  }
  return json{{"model_type", "zaya"},
              {"architectures", {"ZayaForCausalLM"}},
              {"hidden_size", c.hidden_size},
              {"num_attention_heads", 2 * c.num_q_heads},
              {"num_key_value_heads", c.num_kv_heads},
              {"kv_channels", c.head_dim},
              {"vocab_size", c.vocab_size},
              {"zaya_layers", layers},
              {"cca_num_q_heads", q_heads},
              {"num_query_groups_list", groups},
              {"ffn_hidden_size_list", ffn},
              {"zaya_mlp_expansion", mlp},
              {"num_hidden_layers", c.num_stages},
              {"partial_rotary_factor", c.partial_rotary_factor},
              {"rope_theta", c.rope_theta},
              {"rope_scaling", nullptr},
              {"norm_epsilon", c.norm_eps},
              {"max_position_embeddings", c.max_seq_len},
              {"tie_word_embeddings", true},
              {"moe_router_topk", 1},
              {"cca", true},
              {"zaya_use_eda", true},
              {"zaya_use_mod", true},
              {"zaya_high_prec", true},
              {"scale_residual_merge", true},
              {"residual_in_fp32", true},
              {"add_bias_linear", false},
              {"attention_bias", false},
              {"lm_head_bias", false},
              {"gated_linear_unit", true},
              {"activation_func", "swiglu"},
              {"normalization", "RMSNorm"},
              {"bos_token_id", c.bos_token_id},
              {"eos_token_id", c.eos_token_id},
              {"pad_token_id", c.pad_token_id},
              {"torch_dtype", "float32"},
              {"zaya_router_norm_epsilon", c.router_norm_eps},
              {"zaya_init_std", c.init_std}};
}

ModelConfig model_config_from_hf(const json& j, const std::string& where) {
  ZAYA_CHECK(j.is_object(), where, ": config.json must be a JSON object");
  ZAYA_CHECK(j.value("model_type", "") == "zaya", where,
             ": field 'model_type' must be \"zaya\", got ",
             j.contains("model_type") ? j["model_type"].dump() : "nothing");
  auto need = [&](const char* key) -> const json& {
    ZAYA_CHECK(j.contains(key), where, ": missing field '", key, "'");
    return j.at(key);
  };
  ModelConfig c;
  c.hidden_size = need("hidden_size").get<int64_t>();
  const int64_t n_heads = need("num_attention_heads").get<int64_t>();
  c.vocab_size = need("vocab_size").get<int64_t>();
  const json& layers = need("zaya_layers");
  ZAYA_CHECK(layers.is_array() && !layers.empty(), where,
             ": 'zaya_layers' must be a non-empty list");
  c.num_stages = int64_t(layers.size());
  ZAYA_CHECK(n_heads > 0 && c.hidden_size % n_heads == 0, where, ": 'hidden_size' must be a ",
             "multiple of 'num_attention_heads'");
  c.head_dim = c.hidden_size / n_heads;
  if (j.contains("kv_channels") && !j["kv_channels"].is_null())
    ZAYA_CHECK(j["kv_channels"].get<int64_t>() == c.head_dim, where, ": 'kv_channels' (",
               j["kv_channels"].get<int64_t>(), ") must equal hidden_size / num_attention_heads (",
               c.head_dim, ")");
  // Per-stage lists (or their scalar variants): every stage of a kind must agree.
  auto per_stage = [&](const char* list, const char* scalar, bool attn) -> int64_t {
    if (j.contains(list)) {
      const json& l = j.at(list);
      if (l.is_number_integer()) return l.get<int64_t>();
      ZAYA_CHECK(l.is_array() && l.size() == layers.size(), where, ": '", list,
                 "' must list one value per entry of 'zaya_layers'");
      int64_t v = -1;
      for (size_t i = 0; i < l.size(); ++i) {
        if (ModelConfig::is_attention_stage(int64_t(i)) != attn) continue;
        const int64_t x = l[i].get<int64_t>();
        ZAYA_CHECK(v < 0 || x == v, where, ": '", list, "' differs between stages (", v, " vs ", x,
                   " at stage ", i, "); zaya supports uniform stacks only");
        v = x;
      }
      return v;
    }
    ZAYA_CHECK(scalar && j.contains(scalar), where, ": missing field '", list, "'",
               scalar ? std::string(" (or '") + scalar + "')" : "");
    return j.at(scalar).get<int64_t>();
  };
  for (size_t i = 0; i < layers.size(); ++i) {
    const bool attn = layers[i].is_string();
    ZAYA_CHECK(attn == ModelConfig::is_attention_stage(int64_t(i)), where, ": 'zaya_layers' entry ",
               i, " is ", layers[i].dump(), "; zaya expects attention ('a') at even and an expert ",
               "count at odd stages");
    if (attn)
      ZAYA_CHECK(layers[i] == "a", where, ": 'zaya_layers' entry ", i, " must be \"a\"");
    else
      c.num_experts = layers[i].get<int64_t>();
  }
  c.num_q_heads = per_stage("cca_num_q_heads", nullptr, true);
  c.num_kv_heads = per_stage("num_query_groups_list", "num_query_groups", true);
  ZAYA_CHECK(c.num_q_heads * 2 == n_heads, where, ": 'cca_num_q_heads' (", c.num_q_heads,
             ") must be num_attention_heads / 2 (", n_heads / 2, ") as Zyphra's code assumes");
  const int64_t ffn = per_stage("ffn_hidden_size_list", "ffn_hidden_size", false);
  ZAYA_CHECK(ffn % 2 == 0, where, ": 'ffn_hidden_size_list' must be even (gate + up halves)");
  c.expert_hidden = ffn / 2;
  c.router_dim = per_stage("zaya_mlp_expansion", nullptr, false);
  c.partial_rotary_factor = j.value("partial_rotary_factor", 0.5);
  c.rope_theta = j.value("rope_theta", 10000.0);
  c.norm_eps = j.value("norm_epsilon", 1e-5);
  c.max_seq_len = j.value("max_position_embeddings", int64_t(4096));
  c.router_norm_eps = j.value("zaya_router_norm_epsilon", 1e-6);
  c.init_std = j.value("zaya_init_std", 0.02);
  c.bos_token_id = j.value("bos_token_id", int64_t(2));
  c.eos_token_id = j.value("eos_token_id", int64_t(1));
  c.pad_token_id = j.value("pad_token_id", int64_t(0));
  // Flags that change the math must have ZAYA1-base's values.
  const std::pair<const char*, bool> flags[] = {
      {"tie_word_embeddings", true}, {"zaya_use_eda", true},    {"zaya_use_mod", true},
      {"add_bias_linear", false},    {"attention_bias", false}, {"lm_head_bias", false},
      {"clamp_temp", false}};
  for (const auto& [key, expected] : flags)
    if (j.contains(key))
      ZAYA_CHECK(j[key].get<bool>() == expected, where, ": field '", key, "' = ", j[key].dump(),
                 " is not supported (zaya implements ", expected ? "true" : "false", ")");
  if (j.contains("moe_router_topk"))
    ZAYA_CHECK(j["moe_router_topk"].get<int64_t>() == 1, where, ": 'moe_router_topk' must be 1");
  if (j.contains("rope_scaling"))
    ZAYA_CHECK(j["rope_scaling"].is_null() || j["rope_scaling"] == false, where,
               ": 'rope_scaling' is not supported (must be null)");
  c.validate(where);
  return c;
}

}  // namespace zaya
