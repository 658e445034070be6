#include "inference_model.h"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <optional>

#include "backend/device_select.h"
#include "core/error.h"
#include "infer/generate.h"
#include "tokenizer/tokenizer_files.h"

namespace zaya::cli {

void check_vocabularies(int64_t tokenizer, int64_t model, const std::string& tokenizer_path) {
  // Both ways: a larger tokenizer makes ids the model has no row for; a smaller one leaves ids the
  // model may draw and the tokenizer cannot turn into text, unless they are the padding of the
  // model's vocabulary, which the inference commands never draw (GenerateOptions::drawable).
  ZAYA_CHECK(tokenizer == model || is_vocabulary_padding(tokenizer, model), "--tokenizer ",
             tokenizer_path, " has ", tokenizer, " tokens but the model has ", model,
             ": not this model's tokenizer (their vocabularies must be the same size, or the "
             "model's padded past the tokenizer's to a multiple of 64 by less than 1 %)");
}

InferenceModel load_inference_model(const std::string& model, const std::string& tokenizer,
                                    const std::string& device, Precision precision) {
  ZAYA_CHECK(precision != Precision::kBf16,
             "--precision bf16 is not available for decoding; it computes in fp32 (give fp32 or "
             "auto)");
  const ComputeDevice dev = open_device(device, Precision::kFp32);
  InferenceModel m;
  m.loaded = load_model_any(model);
  for (const std::string& w : m.loaded.warnings)
    std::fprintf(stderr, "zaya: warning: %s\n", w.c_str());
  m.tokenizer_path = tokenizer;
  if (m.tokenizer_path.empty()) {
    m.tokenizer_path = m.loaded.path + "/tokenizer.json";
    struct stat st {};
    ZAYA_CHECK(::stat(m.tokenizer_path.c_str(), &st) == 0, "--tokenizer: '", m.loaded.path,
               "' has no tokenizer.json; name the model's tokenizer with --tokenizer");
  }
  m.tokenizer = load_tokenizer(m.tokenizer_path);
  const ModelConfig& c = m.loaded.model->config();
  check_vocabularies(m.tokenizer->vocab_size(), c.vocab_size, m.tokenizer_path);
  const std::optional<int32_t> eos = m.tokenizer->end_of_text_id();
  ZAYA_CHECK(!eos || (*eos >= 0 && *eos < c.vocab_size), "--tokenizer ", m.tokenizer_path,
             ": its end-of-text token id ", eos.value_or(0),
             " is outside the model's vocabulary [0, ", c.vocab_size, ")");
  m.loaded.model->set_backend(*dev.backend);
  m.device = dev.description;
  return m;
}

std::string default_model_name(const InferenceModel& m) {
  const std::string name =
      std::filesystem::path(m.loaded.path).lexically_normal().filename().string();
  return name.empty() ? "zaya" : name;
}

}  // namespace zaya::cli
