#include "train/init_from.h"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "ckpt/hf_interop.h"
#include "core/error.h"
#include "model/zaya_model.h"

namespace zaya {

void load_init_weights(const std::string& path, const ModelConfig& run_model, ParamStore& params,
                       bool lead) {
  using nlohmann::json;
  const LoadedModel init = load_model_any(path);
  const json want = model_config_to_json(run_model),
             got = model_config_to_json(init.model->config());
  std::string differ;
  for (const auto& [key, value] : want.items())
    if (key != "rope_theta" && got.value(key, json()) != value)
      differ +=
          " " + key + " (run " + value.dump() + ", weights " + got.value(key, json()).dump() + ")";
  ZAYA_CHECK(differ.empty(), "--init-from ", init.path,
             ": the weights' model config differs from the run's 'model' section in", differ);
  std::copy_n(init.model->params().weights(), params.size(), params.weights());
  if (lead) {
    for (const std::string& w : init.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
    std::fprintf(stderr, "init from %s (%s): weights loaded, fresh optimizer state\n",
                 init.path.c_str(), init.kind.c_str());
  }
}

}  // namespace zaya
