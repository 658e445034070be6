// Writing HF model directories (single file or sharded with an index), and the helpers shared
// with reading (weights_read.cpp).
#include "model/weights_io.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/regex.h"
#include "io/safetensors.h"
#include "model/hf_config.h"

namespace zaya {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* kSingleFile = "model.safetensors";
const char* kIndexFile = "model.safetensors.index.json";

std::string shard_name(size_t i, size_t n) {
  char b[64];
  std::snprintf(b, sizeof b, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return b;
}

void write_text(const fs::path& path, const std::string& text) {
  const std::string tmp = path.string() + ".tmp";
  std::ofstream out(tmp, std::ios::trunc);
  out << text;
  out.close();
  ZAYA_CHECK(out.good(), "writing '", path.string(), "' failed (disk full?)");
  fs::rename(tmp, path);
}

// Weight files of an earlier save (either layout), so that a reader never mixes two saves.
void remove_old_weights(const fs::path& dir) {
  static const std::regex shard(R"(model-\d{5}-of-\d{5}\.safetensors)");
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n == kSingleFile || n == kIndexFile || std::regex_match(n, shard)) fs::remove(e.path());
  }
}

}  // namespace

void write_hf_model_dir(const std::string& dir, const ModelConfig& config,
                        const std::vector<std::pair<std::string, Tensor>>& weights,
                        const HfWriteOptions& options) {
  ZAYA_CHECK(options.dtype == DType::F32 || options.dtype == DType::BF16,
             "HF export: dtype must be F32 or BF16, got ", dtype_name(options.dtype));
  ZAYA_CHECK(options.max_shard_bytes > 0, "HF export: the maximum shard size must be > 0");
  fs::create_directories(dir);
  remove_old_weights(dir);
  // Stored tensors and their grouping into shards: a new shard starts when the next tensor would
  // push the current one past the limit (a tensor larger than the limit gets a shard alone).
  std::vector<std::vector<std::pair<std::string, Tensor>>> shards(1);
  uint64_t shard_bytes = 0, total_bytes = 0;
  for (const auto& [name, t] : weights) {
    ZAYA_CHECK(t.dtype() == DType::F32, "HF export: tensor '", name, "' must be F32");
    const bool keep_f32 = name.ends_with(".balancing_biases");
    const Tensor stored = keep_f32 ? t : t.to_dtype(options.dtype);
    if (!shards.back().empty() && shard_bytes + stored.nbytes() > options.max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().emplace_back(name, stored);
    shard_bytes += stored.nbytes();
    total_bytes += stored.nbytes();
  }
  const std::map<std::string, std::string> meta = {{"format", "pt"}};
  if (shards.size() == 1) {
    write_safetensors((fs::path(dir) / kSingleFile).string(), shards[0], meta);
  } else {
    json map = json::object();
    for (size_t i = 0; i < shards.size(); ++i) {
      const std::string file = shard_name(i, shards.size());
      write_safetensors((fs::path(dir) / file).string(), shards[i], meta);
      for (const auto& [name, t] : shards[i]) map[name] = file;
    }
    const json index = {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", map}};
    write_text(fs::path(dir) / kIndexFile, index.dump(2) + "\n");
  }
  const std::string dtype = options.dtype == DType::F32 ? "float32" : "bfloat16";
  write_text(fs::path(dir) / "config.json", hf_config_from_model(config, dtype).dump(2) + "\n");
}

void save_model_dir(const std::string& dir, const ZayaModel& model, const HfWriteOptions& options) {
  std::vector<std::pair<std::string, Tensor>> weights;
  for (const ParamSpec& s : model.params().registry().specs())
    weights.emplace_back(s.name, model.params().weight(s.name));
  write_hf_model_dir(dir, model.config(), weights, options);
}

void assign_weight(ParamStore& params, const std::string& name, const Tensor& t,
                   const std::string& where) {
  const ParamSpec* s = params.registry().find(name);
  ZAYA_CHECK(s, where, ": unexpected tensor '", name, "' (not part of a model with this config)");
  ZAYA_CHECK(t.shape() == s->shape, where, ": tensor '", name, "' has shape ", shape_str(t.shape()),
             ", the config needs ", shape_str(s->shape));
  ZAYA_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::BF16, where, ": tensor '", name,
             "' has dtype ", dtype_name(t.dtype()), "; expected F32, BF16 or F16");
  const Tensor f = t.dtype() == DType::F32 ? t : t.to_dtype(DType::F32);
  // Weights that are not numbers would train or score NaN for a whole run without a word.
  const float* v = f.data<float>();
  for (int64_t i = 0; i < s->numel; ++i)
    ZAYA_CHECK(std::isfinite(v[i]), where, ": tensor '", name, "' holds ", v[i], " at element ", i,
               "; weights must be finite numbers");
  std::memcpy(params.weights() + s->offset, f.raw(), size_t(s->numel) * sizeof(float));
}

uint64_t parse_hf_size(const std::string& text, const std::string& flag) {
  size_t pos = 0;
  while (pos < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[pos])) || text[pos] == '.'))
    ++pos;
  std::string unit = text.substr(pos);
  for (char& ch : unit) ch = char(std::toupper(static_cast<unsigned char>(ch)));
  static const std::map<std::string, double> units = {{"", 1.0},
                                                      {"B", 1.0},
                                                      {"KB", 1e3},
                                                      {"MB", 1e6},
                                                      {"GB", 1e9},
                                                      {"TB", 1e12},
                                                      {"KIB", 1024.0},
                                                      {"MIB", 1048576.0},
                                                      {"GIB", 1073741824.0},
                                                      {"TIB", 1099511627776.0}};
  const auto it = units.find(unit);
  char* end = nullptr;
  const std::string number = text.substr(0, pos);
  const double v = number.empty() ? -1.0 : std::strtod(number.c_str(), &end);
  ZAYA_CHECK(it != units.end() && v > 0 && end && *end == '\0', flag, ": '", text,
             "' is not a size (expected e.g. 5GB, 200MB, 64MiB or a byte count)");
  return uint64_t(v * it->second);
}

}  // namespace zaya
