// zaya train --config C [--out DIR] [options]
#include "cmd_train.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "backend/device_select.h"
#include "bench/comm_bench.h"
#include "dist/collective_watchdog.h"
#include "dist/dist_context.h"
#include "serve/train_metrics.h"
#include "train/train_tasks.h"
#include "train/trainer.h"

namespace zaya::cli {

namespace {

struct TrainArgs {
  TrainOptions train;
  bool no_progress = false;
  bool fixed_threads = false;
  int metrics_port = -1;  // --metrics-port: -1 none, 0 any free port
  std::string metrics_host = "127.0.0.1";
};

void add_train_options(CLI::App& train, TrainArgs& a) {
  train.add_option("--config", a.train.config_path, "zaya JSON config")
      ->required()
      ->check(ExistingFile());
  train.add_option("--out", a.train.out_dir, "run directory (default: train.out_dir)")
      ->check(OutputDir());
  train
      .add_option("--max-steps", a.train.max_steps,
                  "stop after this many optimizer steps (default: train.max_steps, or until "
                  "the data phases' token budgets are spent; 0: the same)")
      ->check(NonNegativeInt<int64_t>());
  train
      .add_option("--context-parallel", a.train.context_parallel,
                  "spread each sequence over this many ranks (ring attention; default: "
                  "train.context_parallel, 1); the job's ranks form a grid of data x context, "
                  "so it must divide them")
      ->check(PositiveInt());
  train.add_option_function<std::string>(
      "--resume", [&a](const std::string& text) { a.train.resume = ResumeFrom::parse(text); },
      "continue from a checkpoint: 'auto' (the newest complete one under OUT/ckpt) or a "
      "checkpoint directory");
  train.add_option("--init-from", a.train.init_from,
                   "start from these weights (HF model directory, zaya checkpoint or a run's "
                   "ckpt/ root) with a fresh optimizer; the model config must match");
  train.add_flag("--allow-changes", a.train.allow_changes,
                 "with --resume: accept changed optimizer settings (train.optim) or micro-batch; "
                 "the model, data, seed and global batch can never change on resume");
  train.add_option("--device", a.train.device, kDeviceFlagHelp)->capture_default_str();
  add_mode_option(train, "--precision", a.train.precision, precision_names(), kPrecisionFlagHelp);
  add_mode_option(train, "--weight-storage", a.train.weight_storage, stored_as_names(),
                  "with --precision bf16: bf16 (the weights in bf16 alone, fp32 master weights "
                  "only in the rank's ZeRO-1 range: 2 bytes per parameter plus 4 per parameter "
                  "of the range) or fp32 (full fp32 weights on every rank and a bf16 copy: 6 "
                  "bytes per parameter); the losses and weights are bitwise the same");
  add_mode_option(train, "--gradient-storage", a.train.gradient_storage, stored_as_names(),
                  "with --precision bf16 and --weight-storage bf16: bf16 (the Muon matrices' "
                  "gradients in bf16, 2 bytes each, rounded once per product and micro-batch; "
                  "the others fp32) or fp32 (every gradient in fp32, 4 bytes)");
  add_mode_option(train, "--activation-storage", a.train.activation_storage, stored_as_names(),
                  "on a device (cuda, cpu-as-device): bf16 (what each forward keeps for its "
                  "backward stored in bf16, the norms' statistics, the router and the "
                  "attention's log-sum-exp in fp32, every op computing in fp32) or fp32, the "
                  "default");
  train.add_option_function<std::string>(
      "--device-memory",
      [&a](const std::string& text) {
        a.train.device_memory = int64_t(parse_byte_size(text, "--device-memory"));
      },
      "bytes of device memory one rank's plan must fit before step 1, e.g. 80G (K, M, G: "
      "binary multiples); default: the device's own figure where it gives one. A run that does "
      "not fit is refused with its plan and the options that would fit (zaya info --config)");
  train.add_option("--trace", a.train.trace_path,
                   "write a Chrome trace (Perfetto loads it) of the steps of --trace-steps to this "
                   "file: each rank's step parts, stage forwards and backwards, and collectives "
                   "with their bytes, on one clock (it must not exist)");
  train.add_option_function<std::string>(
      "--trace-steps",
      [&a](const std::string& text) {
        const std::optional<TraceWindow> w = parse_trace_steps(text);
        if (!w)
          throw CLI::ValidationError("--trace-steps",
                                     "expected A:B with 1 <= A <= B (steps, "
                                     "from 1), got '" +
                                         text + "'");
        a.train.trace_steps = *w;
      },
      "the steps --trace records, A:B (from 1, both included; default 2:3)");
  train
      .add_option("--peak-tflops", a.train.peak_tflops,
                  "the peak MFU is taken against, in TFLOP/s (the device's datasheet figure in the "
                  "run's precision, e.g. 989 for an H100 in dense bf16); default: measured at "
                  "start on a square product of this device (printed)")
      ->check(AtLeast(0.0));
  train
      .add_option("--metrics-port", a.metrics_port,
                  "serve each step's metrics (step, loss, tokens/s, MFU, time by part, memory, "
                  "routers) at http://HOST:PORT/metrics in Prometheus' text format; on several "
                  "ranks each rank serves its own at PORT + its local rank, labelled rank=R "
                  "(0: any free ports, printed)")
      ->check(CLI::Range(0, 65535));
  train.add_option("--metrics-host", a.metrics_host,
                   "the address --metrics-port listens on (default 127.0.0.1; 0.0.0.0 for a "
                   "Prometheus on another machine)");
  train
      .add_option("--collective-timeout", a.train.collective_timeouts.default_s,
                  "on several ranks: seconds a rank may wait in one collective before it reports "
                  "which one, of which group, since when (a line on stderr that zaya aegis reads "
                  "to name the ranks that never entered it); 5 s later the rank exits with "
                  "status 124 so that the job ends (default 600; 0: no watch)")
      ->check(AtLeast(0.0));
  train.add_option_function<std::vector<std::string>>(
      "--collective-timeout-kind",
      [&a](const std::vector<std::string>& specs) {
        for (const std::string& spec : specs)
          dist::add_kind_timeout(a.train.collective_timeouts, spec, "--collective-timeout-kind");
      },
      "KIND=SECONDS: another timeout for one kind of collective (all_reduce, reduce_scatter, "
      "all_gather, broadcast, send, recv, barrier, sendrecv, split); repeatable");
  train.add_flag("--no-progress", a.no_progress, "no live progress line");
  train.add_flag("--fixed-threads", a.fixed_threads,
                 "keep the thread count of --threads for the whole run; by default it drops "
                 "while other processes hold the CPU and comes back when they are gone (the "
                 "results are bitwise the same either way)");
}

void print_summary(const TrainSummary& s) {
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
  if (!s.tasks.is_null()) std::printf("tasks: %s", task_results_lines(s.tasks).c_str());
  std::printf("metrics %s\nloss plot %s\nmodel %s\n", s.metrics_path.c_str(), s.plot_path.c_str(),
              s.model_dir.c_str());
  if (!s.tasks_plot_path.empty()) std::printf("tasks plot %s\n", s.tasks_plot_path.c_str());
  for (const auto& text : s.samples) std::printf("--- sample\n%s\n", text.c_str());
}

}  // namespace

Runner add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  auto* train = app.add_subcommand(
      "train", "Train a ZAYA1 model: config sections model, data and train (see configs/)");
  add_train_options(*train, *args);
  return [=]() -> int {
    if (!*train) return kNotMine;
    args->train.progress = !args->no_progress;
    args->train.adaptive_threads = !args->fixed_threads;
    // Every rank serves its own step's figures (its times, memory, MFU; the loss is the run's),
    // on ports one apart on a host, so that a Prometheus sees a straggling or swapping rank.
    std::unique_ptr<serve::TrainMetrics> metrics;
    std::unique_ptr<serve::MetricsEndpoint> endpoint;
    if (args->metrics_port >= 0) {
      const int rank = dist::detect_launch().rank;
      const int port = args->metrics_port == 0 ? 0 : args->metrics_port + dist::local_rank();
      metrics = std::make_unique<serve::TrainMetrics>(rank);
      endpoint = std::make_unique<serve::MetricsEndpoint>(
          args->metrics_host, port, [m = metrics.get()] { return m->text(); });
      std::fprintf(stderr, "metrics: http://%s:%d/metrics (rank %d)\n", args->metrics_host.c_str(),
                   endpoint->port(), rank);
      args->train.on_record = [m = metrics.get()](const nlohmann::json& r) { m->update(r); };
    }
    const TrainSummary s = run_training(args->train);
    if (s.already_finished) {
      std::printf("run %s already finished at step %lld; nothing to do\n", s.out_dir.c_str(),
                  (long long)s.steps);
      return 0;
    }
    print_summary(s);
    return 0;
  };
}

}  // namespace zaya::cli
