// zaya train / plot / sample.
#include "cmd_train.h"

#include <cstdint>
#include <cstdio>
#include <memory>

#include "backend/device_select.h"
#include "core/error.h"
#include "inference_model.h"
#include "model/weights_io.h"
#include "tokenizer/tokenizer_files.h"
#include "train/plot.h"
#include "train/sampler.h"
#include "train/trainer.h"

namespace zaya::cli {

namespace {

struct TrainArgs {
  TrainOptions train;
  bool no_progress = false;
  bool fixed_threads = false;
  std::string metrics, plot_out;
  double baseline = -1;
  std::string model_dir, tokenizer, prompt = "The";
  SampleOptions sample;
};

}  // namespace

Runner add_train_commands(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  auto* train = app.add_subcommand(
      "train", "Train a ZAYA1 model: config sections model, data and train (see configs/)");
  train->add_option("--config", args->train.config_path, "zaya JSON config")->required();
  train->add_option("--out", args->train.out_dir, "run directory (default: train.out_dir)");
  train->add_option("--max-steps", args->train.max_steps,
                    "stop after this many optimizer steps (default: train.max_steps, or until "
                    "the data phases' token budgets are spent)");
  train
      ->add_option("--context-parallel", args->train.context_parallel,
                   "spread each sequence over this many ranks (ring attention; default: "
                   "train.context_parallel, 1); the job's ranks form a grid of data x context, "
                   "so it must divide them")
      ->check(CLI::PositiveNumber);
  train->add_option("--resume", args->train.resume,
                    "continue from a checkpoint: 'auto' (the newest complete one under OUT/ckpt) "
                    "or a checkpoint directory");
  train->add_option("--init-from", args->train.init_from,
                    "start from these weights (HF model directory, zaya checkpoint or a run's "
                    "ckpt/ root) with a fresh optimizer; the model config must match");
  train->add_flag("--allow-changes", args->train.allow_changes,
                  "with --resume: accept changed optimizer settings (train.optim) or micro-batch; "
                  "the model, data, seed and global batch can never change on resume");
  train->add_option("--device", args->train.device, kDeviceFlagHelp)->capture_default_str();
  train->add_option("--precision", args->train.precision, kPrecisionFlagHelp)
      ->capture_default_str();
  train
      ->add_option("--weight-storage", args->train.weight_storage,
                   "with --precision bf16: bf16 (the weights in bf16 alone, fp32 master weights "
                   "only in the rank's ZeRO-1 range: 2 bytes per parameter plus 4 per parameter "
                   "of the range) or fp32 (full fp32 weights on every rank and a bf16 copy: 6 "
                   "bytes per parameter); the losses and weights are bitwise the same")
      ->check(CLI::IsMember({"bf16", "fp32"}))
      ->capture_default_str();
  train
      ->add_option("--gradient-storage", args->train.gradient_storage,
                   "with --precision bf16 and --weight-storage bf16: bf16 (the Muon matrices' "
                   "gradients in bf16, 2 bytes each, rounded once per product and micro-batch; "
                   "the others fp32) or fp32 (every gradient in fp32, 4 bytes)")
      ->check(CLI::IsMember({"bf16", "fp32"}))
      ->capture_default_str();
  train->add_flag("--no-progress", args->no_progress, "no live progress line");
  train->add_flag("--fixed-threads", args->fixed_threads,
                  "keep the thread count of --threads for the whole run; by default it drops "
                  "while other processes hold the CPU and comes back when they are gone (the "
                  "results are bitwise the same either way)");

  auto* plot = app.add_subcommand("plot", "Draw a run's loss curve (metrics.jsonl) as SVG");
  plot->add_option("--metrics", args->metrics, "metrics JSON lines of a run")->required();
  plot->add_option("--out", args->plot_out, "output .svg")->required();
  plot->add_option("--baseline", args->baseline, "draw a horizontal baseline at this loss");

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
      ->check(CLI::Range(1, 1 << 20));
  sample->add_option("--temperature", args->sample.temperature, "0 = greedy")
      ->capture_default_str()
      ->check(NonNegative());
  sample->add_option("--top-k", args->sample.top_k, "sample among the k likeliest (0 = all)")
      ->capture_default_str()
      ->check(CLI::Range(0, INT32_MAX));
  sample->add_option("--seed", args->sample.seed, "sampling seed")->capture_default_str();

  return [=]() -> int {
    if (*train) {
      args->train.progress = !args->no_progress;
      args->train.adaptive_threads = !args->fixed_threads;
      const TrainSummary s = run_training(args->train);
      if (s.already_finished) {
        std::printf("run %s already finished at step %lld; nothing to do\n", s.out_dir.c_str(),
                    (long long)s.steps);
        return 0;
      }
      if (!s.resumed_from.empty())
        std::printf("resumed from %s at step %lld\n", s.resumed_from.c_str(),
                    (long long)s.resumed_step);
      if (!s.last_checkpoint.empty()) std::printf("checkpoint %s\n", s.last_checkpoint.c_str());
      std::printf("trained %lld steps, %lld tokens in %.1f s%s\n", (long long)s.steps,
                  (long long)s.tokens, s.elapsed_s,
                  s.interrupted ? (" (stopped by " + s.stop_signal + ")").c_str() : "");
      std::printf(
          "final train loss %.4f, validation loss %.4f, unigram baseline %.4f "
          "(nats/token)\n",
          s.final_loss, s.final_val_loss, s.unigram_val_loss);
      std::printf("metrics %s\nloss plot %s\nmodel %s\n", s.metrics_path.c_str(),
                  s.plot_path.c_str(), s.model_dir.c_str());
      for (const auto& text : s.samples) std::printf("--- sample\n%s\n", text.c_str());
      return 0;
    }
    if (*plot) {
      PlotOptions po;
      po.baseline = args->baseline;
      plot_loss_svg(args->metrics, args->plot_out, po);
      std::printf("wrote %s\n", args->plot_out.c_str());
      return 0;
    }
    if (*sample) {
      const InferenceModel m = load_inference_model(args->model_dir, args->tokenizer);
      const Tokenizer& tok = *m.tokenizer;
      const auto ids = generate(*m.loaded.model, tok.encode(args->prompt), args->sample);
      std::printf("%s\n", tok.decode(ids).c_str());
      return 0;
    }
    return kNotMine;
  };
}

}  // namespace zaya::cli
