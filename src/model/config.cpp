#include "model/config.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <system_error>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_number.h"
#include "io/input_files.h"
#include "io/json_limits.h"
#include "io/text_file.h"

namespace zaya {

using nlohmann::json;

namespace {

const std::set<std::string> kRequired = {"vocab_size",  "hidden_size",           "num_stages",
                                         "num_q_heads", "num_kv_heads",          "head_dim",
                                         "num_experts", "expert_hidden",         "router_dim",
                                         "rope_theta",  "partial_rotary_factor", "max_seq_len"};
const std::set<std::string> kOptional = {"norm_eps",     "router_norm_eps", "init_std",
                                         "bos_token_id", "eos_token_id",    "pad_token_id"};

int64_t get_int(const json& j, const char* key, const std::string& where, int64_t fallback) {
  if (!j.contains(key)) return fallback;
  const json& v = j.at(key);
  return json_integer(v, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                      where + ": field 'model." + key + "'");
}

double get_num(const json& j, const char* key, const std::string& where, double fallback) {
  if (!j.contains(key)) return fallback;
  const json& v = j.at(key);
  return json_finite(v, -std::numeric_limits<double>::max(), std::numeric_limits<double>::max(),
                     where + ": field 'model." + key + "'");
}

}  // namespace

ModelConfig model_config_from_json(const json& j, const std::string& where) {
  ZAYA_CHECK(j.is_object(), where, ": 'model' must be a JSON object");
  for (const auto& [key, value] : j.items()) {
    ZAYA_CHECK(kRequired.count(key) || kOptional.count(key), where, ": unknown field 'model.", key,
               "' (known fields: vocab_size, hidden_size, num_stages, num_q_heads, num_kv_heads, "
               "head_dim, num_experts, expert_hidden, router_dim, rope_theta, "
               "partial_rotary_factor, max_seq_len, norm_eps, router_norm_eps, init_std, "
               "bos_token_id, eos_token_id, pad_token_id)");
  }
  for (const auto& key : kRequired)
    ZAYA_CHECK(j.contains(key), where, ": missing required field 'model.", key, "'");
  ModelConfig c;
  c.vocab_size = get_int(j, "vocab_size", where, 0);
  c.hidden_size = get_int(j, "hidden_size", where, 0);
  c.num_stages = get_int(j, "num_stages", where, 0);
  c.num_q_heads = get_int(j, "num_q_heads", where, 0);
  c.num_kv_heads = get_int(j, "num_kv_heads", where, 0);
  c.head_dim = get_int(j, "head_dim", where, 0);
  c.num_experts = get_int(j, "num_experts", where, 0);
  c.expert_hidden = get_int(j, "expert_hidden", where, 0);
  c.router_dim = get_int(j, "router_dim", where, 0);
  c.rope_theta = get_num(j, "rope_theta", where, 0);
  c.partial_rotary_factor = get_num(j, "partial_rotary_factor", where, 0);
  c.max_seq_len = get_int(j, "max_seq_len", where, 0);
  c.norm_eps = get_num(j, "norm_eps", where, c.norm_eps);
  c.router_norm_eps = get_num(j, "router_norm_eps", where, c.router_norm_eps);
  c.init_std = get_num(j, "init_std", where, c.init_std);
  c.bos_token_id = get_int(j, "bos_token_id", where, c.bos_token_id);
  c.eos_token_id = get_int(j, "eos_token_id", where, c.eos_token_id);
  c.pad_token_id = get_int(j, "pad_token_id", where, c.pad_token_id);
  c.validate(where);
  return c;
}

void ModelConfig::validate(const std::string& where) const {
  auto positive = [&](const char* name, int64_t v) {
    ZAYA_CHECK(v > 0, where, ": field 'model.", name, "' must be > 0, got ", v);
  };
  positive("vocab_size", vocab_size);
  positive("hidden_size", hidden_size);
  positive("num_stages", num_stages);
  positive("num_q_heads", num_q_heads);
  positive("num_kv_heads", num_kv_heads);
  positive("head_dim", head_dim);
  positive("num_experts", num_experts);
  positive("expert_hidden", expert_hidden);
  positive("router_dim", router_dim);
  positive("max_seq_len", max_seq_len);
  // Upper bounds keep every product of sizes (tensor element counts, activations of a step) far
  // inside int64, and every dimension inside the int the kernels index with. ZAYA1-base uses
  // hidden 2048, 80 stages, 262,272 tokens and 4096..32768 positions.
  auto at_most = [&](const char* name, int64_t v, int64_t hi) {
    ZAYA_CHECK(v <= hi, where, ": field 'model.", name, "' must be ≤ ", hi, ", got ", v);
  };
  at_most("vocab_size", vocab_size, (int64_t(1) << 31) - 1);
  at_most("hidden_size", hidden_size, int64_t(1) << 20);
  at_most("num_stages", num_stages, 4096);
  at_most("num_q_heads", num_q_heads, 4096);
  at_most("num_kv_heads", num_kv_heads, 4096);
  at_most("head_dim", head_dim, 4096);
  at_most("num_experts", num_experts, 4096);
  at_most("expert_hidden", expert_hidden, int64_t(1) << 20);
  at_most("router_dim", router_dim, int64_t(1) << 20);
  at_most("max_seq_len", max_seq_len, int64_t(1) << 24);
  for (const auto& [name, id] :
       {std::pair{"bos_token_id", bos_token_id}, std::pair{"eos_token_id", eos_token_id},
        std::pair{"pad_token_id", pad_token_id}})
    ZAYA_CHECK(id >= -1 && id < vocab_size, where, ": field 'model.", name,
               "' must be -1 (none) or a token id below vocab_size ", vocab_size, ", got ", id);
  ZAYA_CHECK(num_stages % 2 == 0, where, ": field 'model.num_stages' must be even (attention and ",
             "MoE stages alternate), got ", num_stages);
  ZAYA_CHECK(num_q_heads % num_kv_heads == 0, where, ": field 'model.num_q_heads' (", num_q_heads,
             ") must be divisible by 'model.num_kv_heads' (", num_kv_heads, ")");
  ZAYA_CHECK(kv_dim() % 2 == 0, where, ": num_kv_heads * head_dim must be even (the value shift ",
             "splits it into current and previous halves), got ", kv_dim());
  ZAYA_CHECK(partial_rotary_factor >= 0 && partial_rotary_factor <= 1, where,
             ": field 'model.partial_rotary_factor' must lie in [0, 1], got ",
             partial_rotary_factor);
  ZAYA_CHECK(rotary_dim() % 2 == 0, where, ": head_dim * partial_rotary_factor must be an even ",
             "number of dims, got ", rotary_dim());
  ZAYA_CHECK(rope_theta > 0, where, ": field 'model.rope_theta' must be > 0, got ", rope_theta);
  ZAYA_CHECK(norm_eps > 0 && router_norm_eps > 0, where,
             ": norm_eps and router_norm_eps must be > 0");
  ZAYA_CHECK(init_std > 0, where, ": field 'model.init_std' must be > 0, got ", init_std);
}

json model_config_to_json(const ModelConfig& c) {
  return json{{"vocab_size", c.vocab_size},
              {"hidden_size", c.hidden_size},
              {"num_stages", c.num_stages},
              {"num_q_heads", c.num_q_heads},
              {"num_kv_heads", c.num_kv_heads},
              {"head_dim", c.head_dim},
              {"num_experts", c.num_experts},
              {"expert_hidden", c.expert_hidden},
              {"router_dim", c.router_dim},
              {"rope_theta", c.rope_theta},
              {"partial_rotary_factor", c.partial_rotary_factor},
              {"max_seq_len", c.max_seq_len},
              {"norm_eps", c.norm_eps},
              {"router_norm_eps", c.router_norm_eps},
              {"init_std", c.init_std},
              {"bos_token_id", c.bos_token_id},
              {"eos_token_id", c.eos_token_id},
              {"pad_token_id", c.pad_token_id}};
}

json read_config_file(const std::string& path) {
  std::error_code ec;
  ZAYA_CHECK(!std::filesystem::is_directory(path, ec), "config file '", path,
             "' is a directory; name the JSON file in it");
  std::ifstream in(path);
  ZAYA_CHECK(in.good(), "cannot open config file '", path, "'");
  require_regular_file(path, "config file");
  const json j = parse_json_checked(read_text_file(path), path);
  ZAYA_CHECK(j.is_object(), path, ": a zaya config must be a JSON object with a 'model' section");
  for (const auto& [key, value] : j.items()) {
    ZAYA_CHECK(
        key == "model" || key == "description" || key == "data" || key == "train" || key == "eval",
        path, ": unknown top-level field '", key,
        "' (known: model, data, train, eval, description)");
  }
  return j;
}

ModelConfig load_model_config(const std::string& path) {
  const json j = read_config_file(path);
  ZAYA_CHECK(j.contains("model"), path, ": missing required section 'model'");
  return model_config_from_json(j.at("model"), path);
}

}  // namespace zaya
