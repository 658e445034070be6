#include "model/hf_config.h"

#include <filesystem>
#include <optional>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_file.h"

namespace zaya {

using nlohmann::json;

namespace {

// Fields read into ModelConfig or checked against it (see model_config_from_hf).
const std::set<std::string> kReadFields = {
    // sizes
    "model_type", "hidden_size", "num_attention_heads", "num_key_value_heads", "kv_channels",
    "head_dim", "vocab_size", "zaya_layers", "num_experts", "cca_num_q_heads",
    "num_query_groups_list", "num_query_groups", "ffn_hidden_size_list", "ffn_hidden_size",
    "zaya_mlp_expansion", "max_position_embeddings",
    // numbers of the math
    "partial_rotary_factor", "rope_theta", "rope_scaling", "norm_epsilon", "layernorm_epsilon",
    "zaya_router_norm_epsilon", "zaya_init_std",
    // token ids, and fields zaya ignores with a warning
    "bos_token_id", "eos_token_id", "pad_token_id", "attention_dropout", "residual_in_fp32"};

// Fields of Hugging Face's PretrainedConfig and of Zyphra's ZayaConfig that say how a model is
// stored, run or sampled from, never what it computes: accepted and ignored.
const std::set<std::string> kMetadataFields = {
    "architectures", "torch_dtype", "dtype", "transformers_version", "use_cache", "return_dict",
    "output_attentions", "output_hidden_states", "torchscript", "use_bfloat16", "_name_or_path",
    "_commit_hash", "auto_map", "is_decoder", "is_encoder_decoder", "tie_encoder_decoder",
    "add_cross_attention", "cross_attention_hidden_size", "chunk_size_feed_forward", "pruned_heads",
    "id2label", "label2id", "problem_type", "tokenizer_class", "prefix", "sep_token_id",
    "decoder_start_token_id", "finetuning_task", "task_specific_params", "tf_legacy_loss",
    "initializer_range", "_attn_implementation", "attn_implementation",
    "_attn_implementation_autoset",
    // generation defaults that older configs carry
    "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups",
    "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty",
    "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
    "num_return_sequences", "output_scores", "return_dict_in_generate", "forced_bos_token_id",
    "forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty",
    "suppress_tokens", "begin_suppress_tokens",
    // Zyphra's kernel switches, and num_hidden_layers, which the code replaces by len(zaya_layers)
    // (a disagreeing one is named in a warning)
    "num_hidden_layers", "zaya_high_prec", "fused_add_norm", "apply_rope_fusion",
    "bias_activation_fusion", "activation_func_fp8_input_store"};

// Fields that change the math and have exactly one value zaya implements (ZAYA1-base's).
const json& fixed_fields() {
  static const json fields = json::parse(R"({
      "tie_word_embeddings": true, "zaya_use_eda": true, "zaya_use_mod": true,
      "scale_residual_merge": true, "gated_linear_unit": true, "cca": true,
      "add_bias_linear": false, "attention_bias": false, "lm_head_bias": false,
      "clamp_temp": false, "sliding_window": null, "moe_router_topk": 1,
      "cca_time0": 2, "cca_time1": 2, "activation_func": "swiglu", "normalization": "RMSNorm"})");
  return fields;
}

// Typed access to config.json; every error names the file and the field.
struct Fields {
  const json& j;
  const std::string& where;

  bool has(const std::string& k) const { return j.contains(k) && !j.at(k).is_null(); }
  const json& need(const std::string& k) const {
    ZAYA_CHECK(has(k), where, ": missing field '", k, "'");
    return j.at(k);
  }
  int64_t integer(const json& v, const std::string& name) const {
    ZAYA_CHECK(v.is_number_integer(), where, ": field '", name, "' must be an integer, got ",
               v.dump());
    return v.get<int64_t>();
  }
  int64_t integer(const std::string& k) const { return integer(need(k), k); }
  double number_or(const std::string& k, double fallback) const {
    if (!has(k)) return fallback;
    ZAYA_CHECK(j.at(k).is_number(), where, ": field '", k, "' must be a number, got ",
               j.at(k).dump());
    return j.at(k).get<double>();
  }
  // A token id: an integer, null (keep the default) or a list whose first entry zaya keeps.
  int64_t token_id(const std::string& k, int64_t fallback, std::vector<std::string>& notes) const {
    if (!has(k)) return fallback;
    const json& v = j.at(k);
    if (!v.is_array()) return integer(v, k);
    ZAYA_CHECK(!v.empty(), where, ": field '", k, "' is an empty list");
    if (v.size() > 1)
      notes.push_back(where + ": field '" + k + "' lists " + v.dump() + "; zaya keeps only " +
                      v[0].dump() + " (it matters for generation only)");
    return integer(v[0], k + "[0]");
  }

  // One value for every stage of a kind: Zyphra's per-stage list (0 at the stages of the other
  // kind), or a scalar in the same field; every stage of the kind must agree.
  std::optional<int64_t> per_stage(const std::string& k, size_t num_stages, bool attention) const {
    if (!has(k)) return std::nullopt;
    const json& l = j.at(k);
    if (!l.is_array()) return integer(l, k);
    ZAYA_CHECK(l.size() == num_stages, where, ": field '", k, "' lists ", l.size(),
               " values, but 'zaya_layers' has ", num_stages, " stages");
    std::optional<int64_t> v;
    for (size_t i = 0; i < l.size(); ++i) {
      if (ModelConfig::is_attention_stage(int64_t(i)) != attention) continue;
      const int64_t x = integer(l[i], k + "[" + std::to_string(i) + "]");
      ZAYA_CHECK(!v || x == *v, where, ": field '", k, "' differs between stages (", *v, " vs ", x,
                 " at stage ", i, "); zaya supports uniform stacks only");
      v = x;
    }
    return v;
  }
};

// zaya_layers: "a" at even and one expert count (the same everywhere) at odd stages.
void read_layers(const Fields& f, ModelConfig& c) {
  ZAYA_CHECK(f.has("zaya_layers"), f.where, ": missing field 'zaya_layers' (the ZAYA1-base ",
             "layout lists every stage; a config without it, such as upstream transformers' ",
             "ZAYA1-8B layout of combined blocks, is not one zaya reads)");
  const json& layers = f.j.at("zaya_layers");
  ZAYA_CHECK(layers.is_array() && !layers.empty(), f.where,
             ": field 'zaya_layers' must be a non-empty list");
  c.num_stages = int64_t(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    const json& v = layers[i];
    if (ModelConfig::is_attention_stage(int64_t(i))) {
      ZAYA_CHECK(v == "a", f.where, ": field 'zaya_layers' entry ", i, " is ", v.dump(),
                 "; zaya expects attention (\"a\") at even and an expert count at odd stages");
      continue;
    }
    ZAYA_CHECK(v.is_number_integer() && v.get<int64_t>() > 0, f.where, ": field 'zaya_layers' ",
               "entry ", i, " is ", v.dump(), "; zaya expects an expert count at odd stages");
    ZAYA_CHECK(i == 1 || v.get<int64_t>() == c.num_experts, f.where, ": field 'zaya_layers' ",
               "differs between stages (", c.num_experts, " vs ", v.dump(), " experts at stage ", i,
               "); zaya supports uniform stacks only");
    c.num_experts = v.get<int64_t>();
  }
  if (f.has("num_experts"))
    ZAYA_CHECK(f.integer("num_experts") == c.num_experts, f.where, ": field 'num_experts' (",
               f.integer("num_experts"), ") disagrees with 'zaya_layers' (", c.num_experts, ")");
}

// Head counts and sizes. Zyphra's code derives d = hidden_size / num_attention_heads, hard-codes
// o_proj's input as (num_attention_heads / 2)·d and views keys with num_key_value_heads, so a
// valid config has cca_num_q_heads = num_attention_heads / 2 and num_key_value_heads = n_k.
void read_attention(const Fields& f, ModelConfig& c) {
  const size_t L = size_t(c.num_stages);
  const int64_t n_heads = f.integer("num_attention_heads");
  ZAYA_CHECK(n_heads > 0 && c.hidden_size % n_heads == 0, f.where, ": field 'hidden_size' (",
             c.hidden_size, ") must be a multiple of 'num_attention_heads' (", n_heads, ")");
  c.head_dim = c.hidden_size / n_heads;
  for (const char* k : {"kv_channels", "head_dim"})
    if (f.has(k))
      ZAYA_CHECK(f.integer(k) == c.head_dim, f.where, ": field '", k, "' (", f.integer(k),
                 ") must equal hidden_size / num_attention_heads (", c.head_dim, ")");
  c.num_q_heads = f.per_stage("cca_num_q_heads", L, true).value_or(n_heads / 2);
  ZAYA_CHECK(c.num_q_heads * 2 == n_heads, f.where, ": field 'cca_num_q_heads' (", c.num_q_heads,
             ") must be num_attention_heads / 2 (", n_heads / 2, ") as Zyphra's code assumes");
  auto kv = f.per_stage("num_query_groups_list", L, true);
  if (!kv) kv = f.per_stage("num_query_groups", L, true);
  if (!kv && f.has("num_key_value_heads")) kv = f.integer("num_key_value_heads");
  ZAYA_CHECK(kv.has_value(), f.where, ": missing field 'num_query_groups_list' (or ",
             "'num_query_groups' or 'num_key_value_heads')");
  c.num_kv_heads = *kv;
  if (f.has("num_key_value_heads"))
    ZAYA_CHECK(f.integer("num_key_value_heads") == c.num_kv_heads, f.where,
               ": field 'num_key_value_heads' (", f.integer("num_key_value_heads"),
               ") must equal the KV heads of 'num_query_groups_list' (", c.num_kv_heads, ")");
}

void read_moe(const Fields& f, ModelConfig& c) {
  const size_t L = size_t(c.num_stages);
  auto ffn = f.per_stage("ffn_hidden_size_list", L, false);
  if (!ffn) ffn = f.per_stage("ffn_hidden_size", L, false);
  ZAYA_CHECK(ffn.has_value(), f.where, ": missing field 'ffn_hidden_size_list' (or ",
             "'ffn_hidden_size')");
  ZAYA_CHECK(*ffn > 0 && *ffn % 2 == 0, f.where, ": field 'ffn_hidden_size_list' must be positive ",
             "and even (gate and up halves of fc1), got ", *ffn);
  c.expert_hidden = *ffn / 2;
  const auto router = f.per_stage("zaya_mlp_expansion", L, false);
  ZAYA_CHECK(router.has_value(), f.where, ": missing field 'zaya_mlp_expansion'");
  c.router_dim = *router;
}

// Fields that must hold the one value zaya implements; rope_scaling may also be the default type.
void check_fixed(const Fields& f) {
  for (const auto& [key, expected] : fixed_fields().items())
    if (f.j.contains(key))
      ZAYA_CHECK(f.j.at(key) == expected, f.where, ": field '", key, "' = ", f.j.at(key).dump(),
                 " is not supported (zaya implements ", expected.dump(), ")");
  if (f.has("rope_scaling")) {
    const json& rs = f.j.at("rope_scaling");
    // Compared as JSON, not with value<string>(), which throws json::type_error on a number.
    const char* type_key = rs.is_object() && rs.contains("rope_type") ? "rope_type" : "type";
    const bool plain =
        rs == false || (rs.is_object() && rs.contains(type_key) && rs[type_key] == "default");
    ZAYA_CHECK(plain, f.where, ": field 'rope_scaling' = ", rs.dump(),
               " is not supported (zaya implements plain RoPE: null)");
  }
}

}  // namespace

json hf_config_from_model(const ModelConfig& c, const std::string& torch_dtype) {
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
  json j = {{"model_type", "zaya"},
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
            // Zyphra's router reads getattr(config, "layernorm_epsilon", 1e-6).
            {"layernorm_epsilon", c.router_norm_eps},
            {"max_position_embeddings", c.max_seq_len},
            {"attention_dropout", 0.0},
            {"residual_in_fp32", true},
            {"zaya_high_prec", true},
            {"bos_token_id", c.bos_token_id},
            {"eos_token_id", c.eos_token_id},
            {"pad_token_id", c.pad_token_id},
            {"torch_dtype", torch_dtype},
            {"use_cache", true},
            {"zaya_init_std", c.init_std}};
  j.update(fixed_fields());
  return j;
}

ModelConfig model_config_from_hf(const json& j, const std::string& where,
                                 std::vector<std::string>* warnings) {
  ZAYA_CHECK(j.is_object(), where, ": config.json must be a JSON object");
  ZAYA_CHECK(j.contains("model_type") && j["model_type"] == "zaya", where,
             ": field 'model_type' must be \"zaya\", got ",
             j.contains("model_type") ? j["model_type"].dump() : "nothing",
             " (this is not a ZAYA1 model)");
  for (const auto& [key, value] : j.items()) {
    const bool known =
        kReadFields.count(key) || kMetadataFields.count(key) || fixed_fields().contains(key);
    ZAYA_CHECK(known, where, ": unknown field '", key, "': not a field of Zyphra's ZayaConfig ",
               "that zaya knows, so it cannot tell whether it changes the model");
  }
  const Fields f{j, where};
  check_fixed(f);
  ModelConfig c;
  c.hidden_size = f.integer("hidden_size");
  c.vocab_size = f.integer("vocab_size");
  read_layers(f, c);
  read_attention(f, c);
  read_moe(f, c);
  c.partial_rotary_factor = f.number_or("partial_rotary_factor", 0.5);
  c.rope_theta = f.number_or("rope_theta", 10000.0);
  c.norm_eps = f.number_or("norm_epsilon", 1e-5);
  c.router_norm_eps =
      f.number_or("layernorm_epsilon", f.number_or("zaya_router_norm_epsilon", 1e-6));
  c.max_seq_len = f.has("max_position_embeddings") ? f.integer("max_position_embeddings") : 4096;
  c.init_std = f.number_or("zaya_init_std", 0.02);
  std::vector<std::string> notes;
  c.bos_token_id = f.token_id("bos_token_id", c.bos_token_id, notes);
  c.eos_token_id = f.token_id("eos_token_id", c.eos_token_id, notes);
  c.pad_token_id = f.token_id("pad_token_id", c.pad_token_id, notes);
  if (f.has("num_hidden_layers") && f.integer("num_hidden_layers") != c.num_stages)
    notes.push_back(
        where + ": field 'num_hidden_layers' = " + std::to_string(f.integer("num_hidden_layers")) +
        " disagrees with " + "'zaya_layers', which lists " + std::to_string(c.num_stages) +
        " stages; zaya builds those " + std::to_string(c.num_stages) + ", as Zyphra's code does");
  if (f.number_or("attention_dropout", 0.0) != 0.0)
    notes.push_back(where + ": field 'attention_dropout' = " + j["attention_dropout"].dump() +
                    " is ignored: zaya trains and scores without dropout");
  if (j.contains("residual_in_fp32") && j["residual_in_fp32"] == false)
    notes.push_back(where + ": field 'residual_in_fp32' = false is ignored: zaya keeps the " +
                    "residual stream in fp32 (the same in fp32, more precise than a bf16 run)");
  if (warnings) warnings->insert(warnings->end(), notes.begin(), notes.end());
  c.validate(where);
  return c;
}

ModelConfig read_hf_config(const std::string& dir, std::vector<std::string>* warnings) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  ZAYA_CHECK(std::filesystem::exists(path), "cannot open '", path, "' (a Hugging Face model ",
             "directory holds config.json and model.safetensors or ",
             "model.safetensors.index.json with its shards)");
  const json j = read_json_file(path, "config file");
  return model_config_from_hf(j, path, warnings);
}

}  // namespace zaya
