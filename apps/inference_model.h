// A model and its tokenizer for the inference commands (zaya generate, zaya serve): the model from
// an HF directory, a zaya checkpoint or a run's ckpt/ root, the tokenizer from --tokenizer or the
// model directory's tokenizer.json, checked to belong together.
#pragma once

#include <memory>
#include <string>

#include "ckpt/hf_interop.h"
#include "tokenizer/tokenizer.h"

namespace zaya::cli {

struct InferenceModel {
  LoadedModel loaded;
  std::unique_ptr<Tokenizer> tokenizer;
  std::string tokenizer_path;
};

// Prints the loader's warnings to stderr; throws naming the flag when the tokenizer is missing or
// is not the model's.
InferenceModel load_inference_model(const std::string& model, const std::string& tokenizer);

// The id a request names the model by ("model"), unless --model-name says otherwise: the model
// directory's name ("zaya" when it has none). zaya serve and zaya generate take the same.
std::string default_model_name(const InferenceModel& m);

}  // namespace zaya::cli
