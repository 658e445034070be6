// zaya sample --model DIR [--tokenizer FILE] [--prompt TEXT] [--tokens N] [--temperature T]
#include "cmd_sample.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "core/error.h"
#include "inference_model.h"
#include "train/sampler.h"

namespace zaya::cli {

namespace {

struct SampleArgs {
  std::string model_dir, tokenizer, prompt = "The";
  SampleOptions sample;
};

}  // namespace

Runner add_sample_command(CLI::App& app) {
  auto args = std::make_shared<SampleArgs>();
  auto* sample = app.add_subcommand(
      "sample", "Generate text from a model (the short form of zaya generate: temperature, top-k)");
  sample
      ->add_option("--model", args->model_dir,
                   "HF model directory, zaya checkpoint or a run's ckpt/ root")
      ->required();
  sample->add_option("--tokenizer", args->tokenizer,
                     "tokenizer.json (default: the model directory's tokenizer.json)");
  sample->add_option("--prompt", args->prompt, "text to continue")->capture_default_str();
  sample->add_option("--tokens", args->sample.max_new_tokens, "tokens to generate")
      ->capture_default_str()
      ->check(IntIn(1, 1 << 20));
  sample->add_option("--temperature", args->sample.temperature, "0 = greedy")
      ->capture_default_str()
      ->check(NonNegative());
  sample->add_option("--top-k", args->sample.top_k, "sample among the k likeliest (0 = all)")
      ->capture_default_str()
      ->check(IntIn(0, INT32_MAX));
  sample->add_option("--seed", args->sample.seed, "sampling seed")
      ->capture_default_str()
      ->check(Seed());
  return [=]() -> int {
    if (!*sample) return kNotMine;
    const InferenceModel m = load_inference_model(args->model_dir, args->tokenizer);
    const Tokenizer& tok = *m.tokenizer;
    SampleOptions opt = args->sample;
    opt.drawable = int32_t(tok.vocab_size());
    const auto ids = generate(*m.loaded.model, tok.encode(args->prompt), opt);
    std::printf("%s\n", tok.decode(ids).c_str());
    return 0;
  };
}

}  // namespace zaya::cli
