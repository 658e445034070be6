// A model and its tokenizer for the inference commands (zaya generate, zaya serve): the model from
// an HF directory, a zaya checkpoint or a run's ckpt/ root, the tokenizer from --tokenizer or the
// model directory's tokenizer.json, checked to belong together.
#pragma once

#include <memory>
#include <string>

#include "backend/precision.h"
#include "ckpt/hf_interop.h"
#include "tokenizer/tokenizer.h"

namespace zaya::cli {

struct InferenceModel {
  LoadedModel loaded;
  std::unique_ptr<Tokenizer> tokenizer;
  std::string tokenizer_path;
  std::string device;  // where it computes, e.g. "cpu (no GPU found)" (ComputeDevice's)
};

// For the inference commands' --device and --precision (backend/device_select.h): decoding
// computes in fp32 (its products are row-independent fp32 dot products).
inline constexpr const char* kInferencePrecisionHelp =
    "fp32 (auto means fp32: decoding computes in fp32 on every device)";

// Throws naming --tokenizer unless the vocabularies are the same size or the model's is padding.
void check_vocabularies(int64_t tokenizer, int64_t model, const std::string& tokenizer_path);

// Prints the loader's warnings to stderr; throws naming the flag when the tokenizer is missing or
// is not the model's, or the device cannot be opened. The model computes on `device`
// (open_device's names) in `precision` (fp32 or auto).
InferenceModel load_inference_model(const std::string& model, const std::string& tokenizer,
                                    const std::string& device = "cpu",
                                    Precision precision = Precision::kFp32);

// The id a request names the model by ("model"), unless --model-name says otherwise: the model
// directory's name ("zaya" when it has none). zaya serve and zaya generate take the same.
std::string default_model_name(const InferenceModel& m);

}  // namespace zaya::cli
