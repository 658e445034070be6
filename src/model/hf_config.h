// The Hugging Face `config.json` of Zyphra's zaya branch (ZayaForCausalLM), mapped to and from
// ModelConfig. Only uniform stacks (every attention stage alike, every MoE stage alike) are
// representable in ModelConfig; anything else is rejected naming the field.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "model/config.h"

namespace zaya {

nlohmann::json hf_config_from_model(const ModelConfig& c);
ModelConfig model_config_from_hf(const nlohmann::json& j, const std::string& where);

}  // namespace zaya
