#include "ckpt/hf_interop.h"

#include <filesystem>

#include "core/error.h"
#include "optim/optimizer.h"
#include "optim/router_balancer.h"

namespace zaya {

namespace fs = std::filesystem;
using nlohmann::json;

ModelConfig checkpoint_model_config(const LoadedCheckpoint& ck) {
  const std::string where = ck.dir + "/manifest.json";
  const json& cfg = ck.state.config;
  ZAYA_CHECK(cfg.is_object() && cfg.contains("model"), where, ": field 'config.model' (the ",
             "model config of the run) is missing, so the checkpoint's shapes are unknown");
  return model_config_from_json(cfg.at("model"), where + " config");
}

std::vector<std::pair<std::string, Tensor>> checkpoint_weights(const LoadedCheckpoint& ck,
                                                               const ParamRegistry& registry) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const ParamSpec& s : registry.specs()) {
    const auto it = ck.tensors.find(s.name);
    ZAYA_CHECK(it != ck.tensors.end(), "checkpoint ", ck.dir, ": missing tensor '", s.name,
               "' that the model config needs (shape ", shape_str(s.shape), ")");
    ZAYA_CHECK(it->second.shape() == s.shape, "checkpoint ", ck.dir, ": tensor '", s.name,
               "' has shape ", shape_str(it->second.shape()), ", the config needs ",
               shape_str(s.shape));
    out.emplace_back(s.name, it->second);
  }
  return out;
}

void export_checkpoint_to_hf(const std::string& ckpt_dir, const std::string& out_dir,
                             const HfWriteOptions& options) {
  const LoadedCheckpoint ck = load_checkpoint(ckpt_dir);
  const ModelConfig c = checkpoint_model_config(ck);
  write_hf_model_dir(out_dir, c, checkpoint_weights(ck, ParamRegistry(c)), options);
}

std::string import_hf_to_checkpoint(const std::string& hf_dir, const std::string& out_root,
                                    std::vector<std::string>* warnings) {
  const auto model = load_model_dir(hf_dir, warnings);
  // Default optimizer settings: only the state layout matters here, and fresh state is zero.
  const OptimConfig oc = optim_config_from_json(json::object(), "import-hf");
  const Optimizer optimizer(model->params().registry(), oc);
  const RouterBalancer balancer(model->params().registry(), oc);
  TrainerState state;
  state.config = {{"description", "imported from the Hugging Face model " + hf_dir},
                  {"model", model_config_to_json(model->config())}};
  return write_checkpoint(out_root, take_snapshot(model->params(), optimizer, balancer, state));
}

LoadedModel load_model_any(const std::string& path) {
  ZAYA_CHECK(fs::is_directory(path), "model '", path, "' is not a directory (expected a Hugging ",
             "Face model directory, a zaya checkpoint step-N/ or a run's checkpoint root)");
  LoadedModel out;
  out.path = path;
  if (fs::exists(fs::path(path) / "config.json")) {
    out.kind = "hf";
    out.model = load_model_dir(path, &out.warnings);
    return out;
  }
  if (!fs::exists(fs::path(path) / "manifest.json")) {
    out.path =
        find_latest_checkpoint(path, [&](const std::string& why) { out.warnings.push_back(why); });
    ZAYA_CHECK(!out.path.empty(), "model '", path, "' holds no config.json (Hugging Face model), ",
               "no manifest.json (zaya checkpoint) and no complete step-N checkpoint");
  }
  out.kind = "checkpoint";
  const LoadedCheckpoint ck = load_checkpoint(out.path);
  out.model = std::make_unique<ZayaModel>(checkpoint_model_config(ck));
  ParamStore& params = out.model->params();
  for (const auto& [name, t] : checkpoint_weights(ck, params.registry()))
    assign_weight(params, name, t, "checkpoint " + ck.dir);
  return out;
}

}  // namespace zaya
