// Moving models between zaya checkpoints and Hugging Face model directories (ZAYA1 layout), and
// loading a model from either: `zaya ckpt export-hf / import-hf`, `zaya score`, init-from.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/checkpoint.h"
#include "model/weights_io.h"
#include "model/zaya_model.h"

namespace zaya {

// The model config of a checkpoint: the "model" section of the run config in its manifest.
ModelConfig checkpoint_model_config(const LoadedCheckpoint& ck);

// Writes the weights of checkpoint `ckpt_dir` (any world size) as an HF model directory.
void export_checkpoint_to_hf(const std::string& ckpt_dir, const std::string& out_dir,
                             const HfWriteOptions& options);
// Writes the HF model in `hf_dir` as a step-0 checkpoint under `out_root` (fresh optimizer and
// balancer state, a run config with only its "model" section); returns the checkpoint directory.
std::string import_hf_to_checkpoint(const std::string& hf_dir, const std::string& out_root,
                                    std::vector<std::string>* warnings = nullptr);

struct LoadedModel {
  std::unique_ptr<ZayaModel> model;
  std::string kind;  // "hf" or "checkpoint"
  std::string path;  // the directory read (for a run's ckpt/ root, the checkpoint chosen)
  std::vector<std::string> warnings;
};

// `path` is an HF model directory (config.json), a zaya checkpoint (manifest.json) or a run's
// checkpoint root (its newest checkpoint that verifies). Errors say which forms are accepted.
LoadedModel load_model_any(const std::string& path);

}  // namespace zaya
