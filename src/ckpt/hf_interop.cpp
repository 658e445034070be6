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

void export_checkpoint_to_hf(const std::string& ckpt_dir, const std::string& out_dir,
                             const HfWriteOptions& options) {
  // The weights alone: the optimizer state (twice their size) is never read.
  const LoadedCheckpoint ck = checkpoint_header(ckpt_dir, verify_checkpoint(ckpt_dir));
  const ModelConfig c = checkpoint_model_config(ck);
  ParamStore params(c);
  restore_checkpoint_weights(ck, params);
  std::vector<std::pair<std::string, Tensor>> weights;
  for (const ParamSpec& s : params.registry().specs())
    weights.emplace_back(s.name, params.weight(s.name));
  write_hf_model_dir(out_dir, c, weights, options);
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
  const bool root = !fs::exists(fs::path(path) / "manifest.json");
  if (root) {
    out.path =
        find_latest_checkpoint(path, [&](const std::string& why) { out.warnings.push_back(why); });
    ZAYA_CHECK(!out.path.empty(), "model '", path, "' holds no config.json (Hugging Face model), ",
               "no manifest.json (zaya checkpoint) and no complete step-N checkpoint");
  }
  out.kind = "checkpoint";
  // Checksums once (the search above verified its pick), then the weights alone.
  const LoadedCheckpoint ck =
      checkpoint_header(out.path, verify_checkpoint(out.path, nullptr, !root));
  out.model = std::make_unique<ZayaModel>(checkpoint_model_config(ck));
  restore_checkpoint_weights(ck, out.model->params());
  return out;
}

}  // namespace zaya
