// Hugging Face model directories (the ZAYA1 layout): config.json (see hf_config.h) plus the
// weights under the ZAYA1-base tensor names, either in one model.safetensors or sharded over
// model-0000i-of-0000N.safetensors with model.safetensors.index.json mapping each tensor to its
// shard, as Hugging Face's save_pretrained writes them. Reading accepts F32, BF16 and F16 tensors
// (converted to fp32) and checks every tensor's presence, shape and dtype, naming file and tensor.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "model/zaya_model.h"

namespace zaya {

struct HfWriteOptions {
  // F32 makes export -> load bitwise. BF16 rounds to nearest even (lossy); the routers'
  // balancing_biases stay F32 because rounding them can change which expert a token takes.
  DType dtype = DType::F32;
  // Above this many bytes the weights are sharded, as Hugging Face's max_shard_size ("5GB").
  uint64_t max_shard_bytes = 5'000'000'000ULL;
};

// Writes config.json and the weights (name, fp32 tensor) in the given order; replaces weight
// files of an earlier save in `dir`, sharded or not.
void write_hf_model_dir(const std::string& dir, const ModelConfig& config,
                        const std::vector<std::pair<std::string, Tensor>>& weights,
                        const HfWriteOptions& options = {});
void save_model_dir(const std::string& dir, const ZayaModel& model,
                    const HfWriteOptions& options = {});

// Reads model.safetensors.index.json: shard file -> the tensors its 'weight_map' places there.
// Public for the fuzz target fuzz/hf_index.cpp; load_hf_weights is the caller that matters.
std::map<std::string, std::vector<std::string>> read_weight_index(const std::string& path);

// Copies the weights of an HF model directory into `params`; every registry tensor must be
// present with its shape, nothing else may be (but a tied lm_head.weight equal to the embedding).
void load_hf_weights(const std::string& dir, ParamStore& params);
// config.json + weights. Warnings of the config reader (ignored fields) go to *warnings.
std::unique_ptr<ZayaModel> load_model_dir(const std::string& dir,
                                          std::vector<std::string>* warnings = nullptr);

// Copies `t` (F32 or BF16) into the parameter `name`; errors name `where`, the tensor and the
// expected and found shape or dtype.
void assign_weight(ParamStore& params, const std::string& name, const Tensor& t,
                   const std::string& where);

// A size as Hugging Face's max_shard_size spells it: "5GB" (10^9 bytes), "500MiB" (2^20),
// "1000" (bytes). Errors name `flag`.
uint64_t parse_hf_size(const std::string& text, const std::string& flag);

}  // namespace zaya
