// `zaya train --init-from PATH`: a run that starts from another model's weights, with a fresh
// optimizer.
#pragma once

#include <string>

#include "model/config.h"
#include "model/params.h"

namespace zaya {

// Copies the weights of the model at `path` (a zaya model directory or a Hugging Face one,
// ckpt/hf_interop.h) into `params`. Every field of its model config must match `run_model` but
// rope_theta, which the data phases set anyway; a difference names each field. `lead`: this rank
// prints the loader's warnings and one line saying what was loaded.
void load_init_weights(const std::string& path, const ModelConfig& run_model, ParamStore& params,
                       bool lead);

}  // namespace zaya
