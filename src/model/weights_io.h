// Model directories: `config.json` (Hugging Face zaya format) + `model.safetensors` with the
// ZAYA1-base tensor names. Loading checks every tensor's presence, shape and dtype.
#pragma once

#include <memory>
#include <string>

#include "model/zaya_model.h"

namespace zaya {

void save_model_dir(const std::string& dir, const ZayaModel& model);
std::unique_ptr<ZayaModel> load_model_dir(const std::string& dir);
// Copies weights from a safetensors file into the model (F32 or BF16 tensors).
void load_weights(ZayaModel& model, const std::string& safetensors_path);

}  // namespace zaya
