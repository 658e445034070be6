// ModelConfig: every size of a ZAYA1 model. Stages alternate CCA attention (even index) and MoE
// (odd index), as in ZAYA1-base. Read from the "model" section of a zaya JSON config; every field
// is validated and an error names the file and field.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace zaya {

struct ModelConfig {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;    // E
  int64_t num_stages = 0;     // L: attention at even, MoE at odd stage indices
  int64_t num_q_heads = 0;    // n_q (CCA query heads)
  int64_t num_kv_heads = 0;   // n_k
  int64_t head_dim = 0;       // d
  int64_t num_experts = 0;    // X routed experts (+1 skip route)
  int64_t expert_hidden = 0;  // F: SwiGLU width (fc1 has 2F rows)
  int64_t router_dim = 0;     // R: router latent
  double rope_theta = 10000.0;
  double partial_rotary_factor = 0.5;
  int64_t max_seq_len = 0;
  double norm_eps = 1e-5;         // every RMSNorm but the router's
  double router_norm_eps = 1e-6;  // the router's RMSNorm (Zyphra's zaya branch)
  double init_std = 0.02;         // std of the normal init of linear weights
  int64_t bos_token_id = 2, eos_token_id = 1, pad_token_id = 0;

  // Derived sizes.
  int64_t rotary_dim() const { return int64_t(double(head_dim) * partial_rotary_factor); }
  int64_t q_dim() const { return num_q_heads * head_dim; }      // Dq
  int64_t kv_dim() const { return num_kv_heads * head_dim; }    // Dk
  int64_t conv_channels() const { return q_dim() + kv_dim(); }  // C
  int64_t num_routes() const { return num_experts + 1; }        // experts + skip
  int64_t num_attention_stages() const { return num_stages / 2; }
  int64_t num_moe_stages() const { return num_stages / 2; }
  static bool is_attention_stage(int64_t i) { return i % 2 == 0; }

  // Throws zaya::Error naming `where` and the offending field.
  void validate(const std::string& where) const;
};

// Parses the "model" object; unknown or missing fields are errors naming `where` and the field.
ModelConfig model_config_from_json(const nlohmann::json& j, const std::string& where);
nlohmann::json model_config_to_json(const ModelConfig& c);

// Reads a zaya config file: errors name the file when it is missing, not JSON, or has a
// top-level field other than model, data, train and description.
nlohmann::json read_config_file(const std::string& path);
// Reads a zaya config file ({"model": {...}, ...}) and returns its model section.
ModelConfig load_model_config(const std::string& path);

}  // namespace zaya
