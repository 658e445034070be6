// zaya forward --model DIR --tokens 2,17,99 [--device D] [--precision P]
#include "cmd_forward.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/device_select.h"
#include "ckpt/hf_interop.h"
#include "core/error.h"
#include "model/zaya_model.h"

namespace zaya::cli {

namespace {

struct ForwardArgs {
  std::string model, tokens;
  std::string device = "auto";
  Precision precision = Precision::kAuto;
};

// "2,17,99": the token ids, each a non-negative int32.
std::vector<int32_t> parse_token_list(const std::string& text) {
  std::vector<int32_t> tokens;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(item.c_str(), &end, 10);
    ZAYA_CHECK(!item.empty() && end && *end == '\0' && errno == 0 && v >= 0 && v <= INT32_MAX,
               "--tokens: '", item,
               "' is not a token id (a non-negative integer; expected e.g. --tokens 2,17,99)");
    tokens.push_back(int32_t(v));
    pos = comma + 1;
  }
  return tokens;
}

int run_forward(const ForwardArgs& a) {
  const std::vector<int32_t> tokens = parse_token_list(a.tokens);
  const ComputeDevice device = open_device(a.device, a.precision);
  LoadedModel loaded = load_model_any(a.model);
  for (const auto& w : loaded.warnings) std::fprintf(stderr, "zaya: warning: %s\n", w.c_str());
  auto& model = loaded.model;
  model->set_backend(*device.backend);
  const int S = int(tokens.size());
  ZAYA_CHECK(S >= 2, "--tokens: a loss needs at least 2 tokens (each predicts the next), got ", S);
  const auto targets = ZayaModel::shifted_targets(tokens, 1, S);
  const float loss = model->forward(tokens, targets, 1, S);
  std::printf("%s\n",
              nlohmann::json{{"tokens", S}, {"loss", loss}, {"perplexity", std::exp(double(loss))}}
                  .dump()
                  .c_str());
  return 0;
}

}  // namespace

Runner add_forward_command(CLI::App& app) {
  auto args = std::make_shared<ForwardArgs>();
  auto* fwd = app.add_subcommand(
      "forward", "Run a model directory on a token sequence; print the mean next-token loss");
  fwd->add_option("--model", args->model,
                  "Hugging Face model directory or zaya checkpoint (as for zaya score)")
      ->required();
  fwd->add_option("--tokens", args->tokens, "comma-separated token ids, e.g. 2,17,99")->required();
  fwd->add_option("--device", args->device, kDeviceFlagHelp)->capture_default_str();
  add_mode_option(*fwd, "--precision", args->precision, precision_names(), kPrecisionFlagHelp);
  return [=]() -> int { return *fwd ? run_forward(*args) : kNotMine; };
}

}  // namespace zaya::cli
