#include "model/weights_io.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors.h"
#include "model/hf_config.h"

namespace zaya {

namespace fs = std::filesystem;

void save_model_dir(const std::string& dir, const ZayaModel& model) {
  fs::create_directories(dir);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const ParamSpec& s : model.params().registry().specs())
    tensors.emplace_back(s.name, model.params().weight(s.name));
  write_safetensors((fs::path(dir) / "model.safetensors").string(), tensors, {{"format", "pt"}});
  const std::string cfg = (fs::path(dir) / "config.json").string();
  std::ofstream out(cfg + ".tmp");
  out << hf_config_from_model(model.config()).dump(2) << "\n";
  out.close();
  ZAYA_CHECK(out.good(), "writing '", cfg, "' failed");
  fs::rename(cfg + ".tmp", cfg);
}

void load_weights(ZayaModel& model, const std::string& path) {
  SafetensorsFile file = read_safetensors(path);
  ParamStore& ps = model.params();
  for (const ParamSpec& s : ps.registry().specs()) {
    auto it = file.tensors.find(s.name);
    ZAYA_CHECK(it != file.tensors.end(), path, ": missing tensor '", s.name, "' (shape ",
               shape_str(s.shape), ")");
    const Tensor& t = it->second;
    ZAYA_CHECK(t.shape() == s.shape, path, ": tensor '", s.name, "' has shape ",
               shape_str(t.shape()), ", the config needs ", shape_str(s.shape));
    ZAYA_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::BF16, path, ": tensor '", s.name,
               "' has dtype ", dtype_name(t.dtype()), "; expected F32 or BF16 (or F16)");
    const Tensor f = t.dtype() == DType::F32 ? t : t.to_dtype(DType::F32);
    std::memcpy(ps.weights() + s.offset, f.raw(), size_t(s.numel) * sizeof(float));
  }
  for (const auto& [name, t] : file.tensors) {
    if (ps.registry().find(name)) continue;
    if (name == "lm_head.weight") {
      // Tied head: accept a stored copy only if it equals the embedding.
      const Tensor f = t.dtype() == DType::F32 ? t : t.to_dtype(DType::F32);
      const Tensor emb = ps.weight("model.embed_tokens.weight");
      ZAYA_CHECK(f.shape() == emb.shape() && std::memcmp(f.raw(), emb.raw(), emb.nbytes()) == 0,
                 path, ": 'lm_head.weight' differs from 'model.embed_tokens.weight', but ZAYA1 ",
                 "ties them");
      continue;
    }
    ZAYA_FAIL(path, ": unexpected tensor '", name, "' (not part of a model with this config)");
  }
}

std::unique_ptr<ZayaModel> load_model_dir(const std::string& dir) {
  const std::string cfg = (fs::path(dir) / "config.json").string();
  std::ifstream in(cfg);
  ZAYA_CHECK(in.good(), "cannot open '", cfg, "' (a model directory holds config.json and ",
             "model.safetensors)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    ZAYA_FAIL(cfg, ": malformed JSON: ", e.what());
  }
  ModelConfig c;
  try {
    c = model_config_from_hf(j, cfg);
  } catch (const nlohmann::json::exception& e) {
    ZAYA_FAIL(cfg, ": a field has the wrong type: ", e.what());
  }
  auto model = std::make_unique<ZayaModel>(c);
  load_weights(*model, (fs::path(dir) / "model.safetensors").string());
  return model;
}

}  // namespace zaya
