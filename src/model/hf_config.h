// The Hugging Face `config.json` of Zyphra's zaya branch (ZayaForCausalLM, the ZAYA1-base layout),
// mapped to and from ModelConfig. Reading is strict: every field is either read, checked to have
// the only value zaya implements, accepted as metadata that cannot change the model, or an error
// naming it. Only uniform stacks (every attention stage alike, every MoE stage alike) are
// representable in ModelConfig; anything else is rejected naming the field.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/config.h"

namespace zaya {

// `torch_dtype` is the dtype the weight files are written in ("float32" or "bfloat16").
nlohmann::json hf_config_from_model(const ModelConfig& c,
                                    const std::string& torch_dtype = "float32");

// `where` names the file in errors. Fields zaya ignores although they are not plain metadata
// (dropout, Zyphra's bf16 residual) add a message naming the field to *warnings when given.
ModelConfig model_config_from_hf(const nlohmann::json& j, const std::string& where,
                                 std::vector<std::string>* warnings = nullptr);

// Reads and maps DIR/config.json; errors name the file.
ModelConfig read_hf_config(const std::string& dir, std::vector<std::string>* warnings = nullptr);

}  // namespace zaya
