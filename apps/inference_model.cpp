#include "inference_model.h"

#include <sys/stat.h>

#include <cstdio>

#include "backend/device_select.h"
#include "core/error.h"
#include "tokenizer/tokenizer_files.h"

namespace zaya::cli {

InferenceModel load_inference_model(const std::string& model, const std::string& tokenizer,
                                    const std::string& device, const std::string& precision) {
  ZAYA_CHECK(precision == "fp32" || precision == "auto", "--precision: '", precision,
             "' is not available for decoding; it computes in fp32 (give fp32 or auto)");
  const ComputeDevice dev = open_device(device, "fp32");
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
  ZAYA_CHECK(m.tokenizer->vocab_size() <= c.vocab_size, "--tokenizer ", m.tokenizer_path, " has ",
             m.tokenizer->vocab_size(), " tokens but the model has ", c.vocab_size,
             ": not this model's tokenizer");
  m.loaded.model->set_backend(*dev.backend);
  m.device = dev.description;
  return m;
}

}  // namespace zaya::cli
