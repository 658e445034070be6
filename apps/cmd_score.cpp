// zaya score --model DIR (--tokens FILE.json | --text FILE) --out OUT.safetensors [--grads]
#include "cmd_score.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "backend/device_select.h"
#include "ckpt/hf_interop.h"
#include "core/error.h"
#include "eval/score.h"
#include "io/output_path.h"
#include "tokenizer/tokenizer_files.h"

namespace zaya::cli {

namespace {

namespace fs = std::filesystem;

struct ScoreArgs {
  std::string model, tokens, text, tokenizer, out;
  std::string device = "auto";
  Precision precision = Precision::kAuto;
  bool grads = false, bos = false, force = false;
};

// The text file's tokens as one sequence, optionally after the model's BOS id.
TokenBatch encode_text_file(const ScoreArgs& a, const ModelConfig& config) {
  const std::string tok_path =
      a.tokenizer.empty() ? (fs::path(a.model) / "tokenizer.json").string() : a.tokenizer;
  ZAYA_CHECK(fs::exists(tok_path), "--text needs a tokenizer: '", tok_path, "' does not exist ",
             "(pass --tokenizer PATH)");
  const auto tokenizer = load_tokenizer(tok_path);
  ZAYA_CHECK(tokenizer->vocab_size() <= config.vocab_size, "--tokenizer: '", tok_path, "' has ",
             tokenizer->vocab_size(), " tokens, more than the model's vocab_size ",
             config.vocab_size);
  std::ifstream in(a.text, std::ios::binary);
  ZAYA_CHECK(in.good(), "--text: cannot open '", a.text, "'");
  std::ostringstream text;
  text << in.rdbuf();
  TokenBatch batch;
  if (a.bos) batch.tokens.push_back(int32_t(config.bos_token_id));
  const std::vector<int32_t> ids = tokenizer->encode(text.str());
  batch.tokens.insert(batch.tokens.end(), ids.begin(), ids.end());
  batch.batch = 1;
  batch.seq = int(batch.tokens.size());
  return batch;
}

}  // namespace

Runner add_score_commands(CLI::App& app) {
  auto a = std::make_shared<ScoreArgs>();
  auto* score = app.add_subcommand(
      "score",
      "Run a model on tokens or text: write logits, per-token log-probabilities, the "
      "mean next-token loss (and gradients); print a JSON summary");
  score
      ->add_option("--model", a->model,
                   "Hugging Face model directory (config.json + safetensors), zaya checkpoint "
                   "step-N/ or a run's checkpoint root (newest complete checkpoint)")
      ->required();
  auto* tokens = score->add_option(
      "--tokens", a->tokens,
      "JSON token ids: a list of ints (one sequence) or a list of equal-length lists (a batch); "
      "at least 2 tokens per sequence");
  auto* text = score->add_option("--text", a->text, "text file, scored as one sequence")
                   ->check(ExistingFile());
  tokens->excludes(text);
  score->add_option("--tokenizer", a->tokenizer,
                    "tokenizer for --text (default: tokenizer.json in the model directory)");
  score->add_flag("--bos", a->bos, "with --text: put the model's bos_token_id first");
  score
      ->add_option("--out", a->out,
                   "output safetensors: logits [B,S,V], log_probs [B,S-1], loss [], and with "
                   "--grads grad.<parameter name> for every parameter")
      ->required()
      ->check(OutputFile());
  score->add_flag("--grads", a->grads, "also write the gradient of the mean loss");
  score->add_flag("--force", a->force, "replace an existing --out file");
  score->add_option("--device", a->device, kDeviceFlagHelp)->capture_default_str();
  add_mode_option(*score, "--precision", a->precision, precision_names(), kPrecisionFlagHelp);

  return [=]() -> int {
    if (!*score) return kNotMine;
    ZAYA_CHECK(!a->tokens.empty() || !a->text.empty(), "zaya score needs --tokens FILE.json or ",
               "--text FILE");
    std::vector<std::string> inputs{a->model};
    for (const std::string* in : {&a->tokens, &a->text, &a->tokenizer})
      if (!in->empty()) inputs.push_back(*in);
    StagedOutput out({"--out", a->out, OutputKind::kFile, a->force, inputs});
    const ComputeDevice device = open_device(a->device, a->precision);
    LoadedModel m = load_model_any(a->model);
    m.model->set_backend(*device.backend);
    for (const std::string& w : m.warnings) std::fprintf(stderr, "zaya: warning: %s\n", w.c_str());
    const TokenBatch batch =
        a->tokens.empty() ? encode_text_file(*a, m.model->config()) : read_token_file(a->tokens);
    const ScoreResult r = score_tokens(*m.model, batch, a->grads);
    write_score_file(out.path(), r);
    out.commit();
    std::printf("%s\n", score_summary_json(batch, r).c_str());
    return 0;
  };
}

}  // namespace zaya::cli
