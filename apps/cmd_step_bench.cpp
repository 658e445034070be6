// zaya bench step --config C [--batch N] [--seq N] [--steps N] [--optimizer] [--json]
#include "cmd_step_bench.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <omp.h>
#include <nlohmann/json.hpp>

#include "backend/blas_report.h"
#include "backend/device_select.h"
#include "backend/vector_path.h"
#include "bench/step_bench.h"
#include "core/error.h"
#include "io/output_path.h"
#include "model/config.h"
#include "model/recompute.h"
#include "serve/train_metrics.h"

namespace zaya::cli {

namespace {

struct StepArgs {
  std::string config, chunks, recompute = "none";
  StepBenchOptions opt;
  bool json = false, force = false;
};

void add_step_options(CLI::App& step, StepArgs& a) {
  step.add_option("--config", a.config, "zaya JSON config")->required()->check(ExistingFile());
  step.add_option("--batch", a.opt.batch, "sequences per step")
      ->capture_default_str()
      ->check(IntIn(1, 1 << 16));
  step.add_option("--seq", a.opt.seq, "tokens per sequence")
      ->capture_default_str()
      ->check(PositiveInt());
  step.add_option("--steps", a.opt.steps, "timed steps")
      ->capture_default_str()
      ->check(PositiveInt());
  step.add_option("--warmup", a.opt.warmup, "untimed warm-up steps")
      ->capture_default_str()
      ->check(NonNegativeInt());
  step.add_option("--seed", a.opt.seed, "init and token seed")
      ->capture_default_str()
      ->check(Seed());
  step.add_option("--save-model", a.opt.save_model_dir,
                  "write the benchmarked model (config.json + model.safetensors) to this "
                  "directory, e.g. for the PyTorch peer")
      ->check(OutputDir());
  step.add_flag("--force", a.force, "replace an existing, non-empty --save-model directory");
  step.add_option("--device", a.opt.device, kDeviceFlagHelp)->capture_default_str();
  add_mode_option(step, "--precision", a.opt.precision, precision_names(), kPrecisionFlagHelp);
  step.add_flag("--optimizer", a.opt.optimizer,
                "time the optimizer's step too (AdamW and Muon with their default settings, on "
                "the same device), and print its share");
  step.add_option("--lm-head-chunks", a.chunks,
                  "TOKENS,VOCAB: the LM head and loss in blocks of that many logits, never the "
                  "whole [tokens x vocab] (default: the logits materialised, as the PyTorch peer "
                  "does; at ZAYA1's 262,272 tokens of vocabulary a GPU run wants e.g. 4096,32768)");
  step.add_option("--recompute", a.recompute,
                  "MODE[,MODE...]: what each stage's forward keeps for the backward (none, "
                  "selective or full, as train.recompute); several are timed side by side, each "
                  "step running every one in turn on the same weights, with each one's time and "
                  "activations against the first's")
      ->capture_default_str();
  step.add_flag("--accounting", a.opt.accounting,
                "time each step without and then with what zaya train --metrics-port adds "
                "(the step accounting: parts, MFU, memory, routers; the record; the Prometheus "
                "gauges updated and their text rendered once per step), side by side");
  step.add_flag("--json", a.json, "print one JSON line instead of text");
}

// "none,selective" → the modes, each named once.
std::vector<Recompute> parse_recompute_list(const std::string& text) {
  std::vector<Recompute> modes;
  std::string known;
  for (const auto& [name, mode] : recompute_names()) known += (known.empty() ? "" : ", ") + name;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string name = text.substr(at, comma - at);
    const auto it = recompute_names().find(name);
    ZAYA_CHECK(it != recompute_names().end(), "--recompute: '", name, "' is not a mode (", known,
               "; several separated by commas)");
    ZAYA_CHECK(std::find(modes.begin(), modes.end(), it->second) == modes.end(), "--recompute: '",
               name, "' is named twice");
    modes.push_back(it->second);
    at = comma + 1;
  }
  return modes;
}

nlohmann::json recompute_json(const StepBenchResult& r) {
  nlohmann::json runs = nlohmann::json::array();
  for (const RecomputeRun& run : r.recompute_runs)
    runs.push_back({{"mode", recompute_name(run.mode)},
                    {"accounting", run.accounting},
                    {"step_ms", run.step_ms},
                    {"tokens_per_s", run.tokens_per_s},
                    {"activation_bytes", run.activation_bytes},
                    {"loss", run.loss}});
  return runs;
}

void print_recompute_runs(const StepBenchResult& r) {
  const RecomputeRun& base = r.recompute_runs.front();
  for (const RecomputeRun& run : r.recompute_runs) {
    const std::string name = run.accounting ? "+accounting" : recompute_name(run.mode);
    std::printf(
        "  recompute %-11s %8.1f ms/step (%.4fx %s's), activations %9.1f MiB (%.3fx), loss "
        "%.6f\n",
        name.c_str(), run.step_ms, run.step_ms / base.step_ms, recompute_name(base.mode),
        double(run.activation_bytes) / (1 << 20),
        double(run.activation_bytes) / double(base.activation_bytes), run.loss);
  }
}

void print_step_result(const StepBenchResult& r, const StepBenchOptions& opt, int nthreads,
                       bool json) {
  if (json) {
    std::printf("%s\n", nlohmann::json{{"impl", "zaya"},
                                       {"device", r.device},
                                       {"tokens_per_s", r.tokens_per_s},
                                       {"step_ms", r.step_ms},
                                       {"optimizer_ms", r.optimizer_ms},
                                       {"loss", r.loss},
                                       {"threads", nthreads},
                                       {"blas_kernels", blas_kernels()},
                                       {"arena_bytes", r.arena_bytes},
                                       {"train_flops_per_token", r.train_flops_per_token},
                                       {"device_memory_bytes", r.device_memory_bytes},
                                       {"host_reads_per_step", r.host_reads_per_step},
                                       {"host_read_bytes_per_step", r.host_read_bytes_per_step},
                                       {"recompute", recompute_json(r)}}
                            .dump()
                            .c_str());
    return;
  }
  std::printf("zaya (%s): %.1f ms/step, %.0f tokens/s (fwd+bwd%s), loss %.4f, arena %.1f MiB\n",
              r.device.c_str(), r.step_ms, r.tokens_per_s, opt.optimizer ? "+optimizer" : "",
              r.loss, double(r.arena_bytes) / (1 << 20));
  if (r.recompute_runs.size() > 1 || r.recompute_runs.front().mode != Recompute::kNone)
    print_recompute_runs(r);
  if (opt.optimizer)
    std::printf("  optimizer: %.1f ms/step (%.1f %% of the step)\n", r.optimizer_ms,
                100.0 * r.optimizer_ms / r.step_ms);
  if (!r.host_memory && r.host_reads_per_step > 0)
    std::printf("  %.0f copies to the host per step (%.1f MiB), each a GPU synchronisation\n",
                r.host_reads_per_step, r.host_read_bytes_per_step / (1 << 20));
}

int run_step(StepArgs& a) {
  StepBenchOptions& sopt = a.opt;
  const ModelConfig c = load_model_config(a.config);
  ZAYA_CHECK(sopt.seq <= c.max_seq_len, "--seq: ", sopt.seq, " is past the model's max_seq_len ",
             c.max_seq_len, " ('model.max_seq_len' of ", a.config, ")");
  ZAYA_CHECK(int64_t(sopt.batch) * sopt.seq <= INT32_MAX, "--batch ", sopt.batch, " x --seq ",
             sopt.seq, ": more than 2^31 - 1 tokens in one step");
  if (!a.chunks.empty()) {
    const LmHeadChunks chunks = parse_lm_head_chunks(a.chunks);
    sopt.lm_head_chunk_tokens = chunks.tokens;
    sopt.lm_head_chunk_vocab = chunks.vocab;
  }
  sopt.recompute = parse_recompute_list(a.recompute);
  ZAYA_CHECK(!sopt.accounting || sopt.recompute.size() == 1,
             "--accounting: give one --recompute mode (the step is timed with and without the "
             "accounting)");
  // What zaya train --metrics-port does with each record: the gauges, and (here every step, a
  // Prometheus every 15 s or so) their text for a scrape.
  serve::TrainMetrics metrics(0);
  if (sopt.accounting)
    sopt.on_record = [&metrics](const nlohmann::json& rec) {
      metrics.update(rec);
      const std::string scrape = metrics.text();
      ZAYA_CHECK(!scrape.empty(), "the metrics' text is empty");
    };
  const int nthreads = omp_get_max_threads();
  if (!a.json) {
    std::printf("bench step: %s, batch %d x seq %d, %d threads\n", a.config.c_str(), sopt.batch,
                sopt.seq, nthreads);
    std::printf("%s\n", blas_summary_line().c_str());
    std::printf("%s\n", vector_path_summary_line().c_str());
  }
  std::optional<StagedOutput> model_out;
  if (!sopt.save_model_dir.empty()) {
    model_out.emplace(OutputRule{
        "--save-model", sopt.save_model_dir, OutputKind::kDirectory, a.force, {a.config}});
    sopt.save_model_dir = model_out->path();
  }
  const StepBenchResult r = run_step_bench(c, sopt, !a.json);
  if (model_out) model_out->commit();
  print_step_result(r, sopt, nthreads, a.json);
  return 0;
}

}  // namespace

Runner add_step_bench_command(CLI::App& bench) {
  auto args = std::make_shared<StepArgs>();
  auto* step = bench.add_subcommand("step",
                                    "Forward+backward tokens/s of the model on random "
                                    "tokens (random init)");
  add_step_options(*step, *args);
  return [=]() -> int { return *step ? run_step(*args) : kNotMine; };
}

}  // namespace zaya::cli
