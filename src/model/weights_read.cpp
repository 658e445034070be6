// Reading HF model directories: one model.safetensors, or shards listed by
// model.safetensors.index.json, loaded one shard at a time.
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "model/hf_config.h"
#include "model/weights_io.h"

namespace zaya {

namespace fs = std::filesystem;
using nlohmann::json;

std::map<std::string, std::vector<std::string>> read_weight_index(const std::string& path) {
  const json j = read_json_file(path, "shard index");
  ZAYA_CHECK(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(), path,
             ": field 'weight_map' (tensor name -> shard file) is missing or not an object");
  std::map<std::string, std::vector<std::string>> shards;
  for (const auto& [name, file] : j["weight_map"].items()) {
    ZAYA_CHECK(file.is_string(), path, ": 'weight_map' entry '", name, "' must be a file name");
    const std::string f = file.get<std::string>();
    ZAYA_CHECK(!f.empty() && f.find('/') == std::string::npos && f != "..", path,
               ": 'weight_map' entry '", name, "' names '", f, "', not a plain file name");
    shards[f].push_back(name);
  }
  return shards;
}

namespace {

std::string some_names(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < 3; ++i) s += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > 3) s += ", ...";
  return s;
}

// Accumulates the tensors of one or more files into the model.
class WeightSink {
 public:
  explicit WeightSink(ParamStore& params) : params_(params) {}

  void take(const std::string& file, const std::string& name, const Tensor& t) {
    if (name == "lm_head.weight" && !params_.registry().find(name)) {
      ZAYA_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::BF16, file, ": tensor '", name,
                 "' has dtype ", dtype_name(t.dtype()), "; expected F32, BF16 or F16");
      lm_head_ = t.dtype() == DType::F32 ? t : t.to_dtype(DType::F32);
      lm_head_file_ = file;
      return;
    }
    assign_weight(params_, name, t, file);
    seen_.insert(name);
  }

  // Every registry tensor arrived; a tied head copy, if any, equals the embedding.
  void finish(const std::string& where) const {
    for (const ParamSpec& s : params_.registry().specs())
      ZAYA_CHECK(seen_.count(s.name), where, ": missing tensor '", s.name, "' (shape ",
                 shape_str(s.shape), ")");
    if (!lm_head_.defined()) return;
    const Tensor emb = params_.weight("model.embed_tokens.weight");
    ZAYA_CHECK(lm_head_.shape() == emb.shape() &&
                   std::memcmp(lm_head_.raw(), emb.raw(), emb.nbytes()) == 0,
               lm_head_file_, ": 'lm_head.weight' differs from 'model.embed_tokens.weight', but ",
               "ZAYA1 ties them");
  }

 private:
  ParamStore& params_;
  std::set<std::string> seen_;
  Tensor lm_head_;
  std::string lm_head_file_;
};

void load_sharded(const fs::path& dir, const std::string& index_path, WeightSink& sink) {
  const auto shards = read_weight_index(index_path);
  ZAYA_CHECK(!shards.empty(), index_path, ": 'weight_map' is empty");
  for (const auto& [file, names] : shards)
    ZAYA_CHECK(fs::exists(dir / file), index_path, ": shard '", file, "' is missing from ",
               dir.string(), " (it holds ", names.size(), " tensors: ", some_names(names), ")");
  for (const auto& [file, names] : shards) {
    const std::string path = (dir / file).string();
    const SafetensorsFile f = read_safetensors(path);
    for (const std::string& name : names)
      ZAYA_CHECK(f.tensors.count(name), path, ": lacks tensor '", name, "', which ", index_path,
                 " places in it");
    const std::set<std::string> listed(names.begin(), names.end());
    for (const auto& [name, t] : f.tensors) {
      ZAYA_CHECK(listed.count(name), path, ": tensor '", name, "' is not listed for this shard ",
                 "in ", index_path);
      sink.take(path, name, t);
    }
  }
}

}  // namespace

void load_hf_weights(const std::string& dir, ParamStore& params) {
  const fs::path d(dir);
  const std::string index = (d / "model.safetensors.index.json").string();
  const std::string single = (d / "model.safetensors").string();
  WeightSink sink(params);
  if (fs::exists(index)) {
    load_sharded(d, index, sink);
    sink.finish(index);
    return;
  }
  ZAYA_CHECK(fs::exists(single), dir, ": no weights (expected model.safetensors or ",
             "model.safetensors.index.json with its shards)");
  const SafetensorsFile f = read_safetensors(single);
  for (const auto& [name, t] : f.tensors) sink.take(single, name, t);
  sink.finish(single);
}

std::unique_ptr<ZayaModel> load_model_dir(const std::string& dir,
                                          std::vector<std::string>* warnings) {
  auto model = std::make_unique<ZayaModel>(read_hf_config(dir, warnings));
  load_hf_weights(dir, model->params());
  return model;
}

}  // namespace zaya
