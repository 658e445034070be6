#include "bench/step_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include "backend/device_select.h"
#include "core/error.h"
#include "core/rng.h"
#include "model/model_info.h"
#include "model/weights_io.h"
#include "model/zaya_model.h"
#include "optim/parameter_update.h"
#include "optim/router_balancer.h"
#include "train/step_accounting.h"

namespace zaya {

namespace {

// What `zaya train --metrics-port` does after each step, beside the step itself: the routes
// counted per MoE stage, the record of metrics.jsonl with the accounting's fields, handed to
// `on_record` (the command's: the Prometheus gauges updated and one scrape of their text).
void add_step_record(StepAccounting& accounting, const StepBenchOptions::RecordSink& on_record,
                     const ZayaModel& model, const ModelConfig& config, int step, float loss,
                     const StepBenchOptions& opt, const StepTimes& times, double step_s) {
  std::vector<RouteCounts> stage_counts;
  for (int64_t k = 0; k < config.num_moe_stages(); ++k) {
    stage_counts.emplace_back(size_t(config.num_routes()), 0);
    accumulate_routes(stage_counts.back(), model.routes(int(2 * k + 1)));  // MoE stages are odd
  }
  const int64_t tokens = int64_t(opt.batch) * opt.seq;
  nlohmann::json rec = {{"step", step + 1},
                        {"loss", loss},
                        {"step_tokens", tokens},
                        {"tokens_per_s", double(tokens) / step_s},
                        {"batch_sequences", opt.batch},
                        {"seq_len", opt.seq}};
  nlohmann::json load = nlohmann::json::array();
  for (const RouteCounts& counts : stage_counts) load.push_back(expert_load(counts).fractions);
  rec["expert_load"] = load;
  accounting.add_to(rec, tokens, opt.seq, step_s, times, stage_counts);
  if (on_record) on_record(rec);
}

}  // namespace

StepBenchResult run_step_bench(const ModelConfig& config, const StepBenchOptions& opt,
                               bool progress) {
  const auto setup_start = std::chrono::steady_clock::now();
  const ComputeDevice device = open_device(opt.device, opt.precision);
  ZayaModel model(config);
  model.params().init(opt.seed);
  // The weights and gradients as training keeps them: in bf16 on a bf16 GPU (the Muon matrices'
  // gradients), with the fp32 master weights of one rank's range, all of them here
  // (model/parameter_placement.h; the master weights are ParameterUpdate's).
  ParameterPlacement& placement = model.placement();
  if (device.backend->bf16_weights() && !device.backend->host_memory())
    placement.set_bf16_weight_storage(/*bf16_gradients=*/true);
  model.set_backend(*device.backend);
  placement.set_resident(true);
  model.set_lm_head_chunks({opt.lm_head_chunk_tokens, opt.lm_head_chunk_vocab});
  // The optimizer's step as one rank of `zaya train` takes it (optim/parameter_update.h).
  std::unique_ptr<ParameterUpdate> update;
  if (opt.optimizer) update = std::make_unique<ParameterUpdate>(placement, OptimConfig{});
  if (!opt.save_model_dir.empty()) save_model_dir(opt.save_model_dir, model);
  if (progress)
    std::fprintf(
        stderr, "  setup: %.1f s (the device, the weights' initialisation and placement)\n",
        std::chrono::duration<double>(std::chrono::steady_clock::now() - setup_start).count());
  const int N = opt.batch * opt.seq;
  std::vector<int32_t> tokens(N);
  const Philox rng(opt.seed, hash_name("bench tokens"));
  for (int t = 0; t < N; ++t)
    tokens[t] = int32_t(rng.words(uint64_t(t))[0] % uint32_t(config.vocab_size));
  const auto targets = ZayaModel::shifted_targets(tokens, opt.batch, opt.seq);
  StepBenchResult r;
  r.device = device.description;
  r.host_memory = device.backend->host_memory();
  ZAYA_CHECK(!opt.recompute.empty(), "run_step_bench: no recompute mode to time");
  ZAYA_CHECK(!opt.accounting || opt.recompute.size() == 1,
             "--accounting times one recompute mode with and without it; got ",
             opt.recompute.size());
  for (const Recompute mode : opt.recompute) r.recompute_runs.push_back({mode, false});
  if (opt.accounting) r.recompute_runs.push_back({opt.recompute[0], true});
  const size_t modes = r.recompute_runs.size();
  std::vector<double> mode_s(modes, 0.0);
  std::unique_ptr<StepAccounting> accounting;  // measures the peak once, before the loop
  if (opt.accounting)
    accounting = std::make_unique<StepAccounting>(config, device, /*peak_tflops_given=*/0);
  double total_s = 0, optimizer_s = 0;
  int64_t reads = 0, read_bytes = 0;
  const Backend& be = *device.backend;
  for (int step = 0; step < opt.warmup + opt.steps; ++step)
    for (size_t m = 0; m < modes; ++m) {
      RecomputeRun& run = r.recompute_runs[m];
      model.set_recompute(run.mode);
      if (run.accounting)
        model.set_router_logits_observer([&](int k, std::span<const float> logits, int routes) {
          accounting->observe_router_logits(k, logits, routes);
        });
      const int64_t reads0 = be.host_reads(), bytes0 = be.host_read_bytes();
      const auto t0 = std::chrono::steady_clock::now();
      PartClock clock;
      StepTimes times;
      placement.zero_grads();
      run.loss = model.forward(tokens, targets, opt.batch, opt.seq);
      if (run.accounting) clock.mark(times.forward_s, "forward");
      model.backward();
      be.synchronize();
      if (run.accounting) clock.mark(times.backward_s, "backward");
      run.activation_bytes = std::max(run.activation_bytes, model.step_activation_bytes());
      const auto t1 = std::chrono::steady_clock::now();
      if (update) {
        update->step(1e-4);
        be.synchronize();
      }
      if (run.accounting) {
        clock.mark(times.optimizer_s, "optimizer");
        add_step_record(
            *accounting, opt.on_record, model, config, step, run.loss, opt, times,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        model.set_router_logits_observer({});
      }
      const auto t2 = std::chrono::steady_clock::now();
      const double s = std::chrono::duration<double>(t2 - t0).count();
      const bool timed = step >= opt.warmup;
      if (timed) mode_s[m] += s;
      if (timed && m == 0) {
        total_s += s;
        optimizer_s += std::chrono::duration<double>(t2 - t1).count();
        reads += be.host_reads() - reads0;
        read_bytes += be.host_read_bytes() - bytes0;
      }
      if (progress)
        std::fprintf(stderr, "  %s step %d/%d%s%s%s: %.1f ms, %.0f tok/s, loss %.4f\n",
                     timed ? "timed " : "warmup", timed ? step - opt.warmup + 1 : step + 1,
                     timed ? opt.steps : opt.warmup, modes > 1 ? ", recompute " : "",
                     modes > 1 ? recompute_name(run.mode) : "",
                     run.accounting ? ", with the accounting" : "", s * 1e3, N / s, run.loss);
    }
  for (size_t m = 0; m < modes; ++m) {
    r.recompute_runs[m].step_ms = mode_s[m] / opt.steps * 1e3;
    r.recompute_runs[m].tokens_per_s = double(N) * opt.steps / mode_s[m];
  }
  r.loss = r.recompute_runs[0].loss;
  r.step_ms = total_s / opt.steps * 1e3;
  r.optimizer_ms = optimizer_s / opt.steps * 1e3;
  r.host_reads_per_step = double(reads) / opt.steps;
  r.host_read_bytes_per_step = double(read_bytes) / opt.steps;
  r.tokens_per_s = double(N) * opt.steps / total_s;
  r.arena_bytes = model.arena_bytes();
  r.train_flops_per_token = compute_model_info(config, opt.seq).train_flops_per_token;
  if (device.caps().memory_figures) r.device_memory_bytes = double(device.memory().used);
  return r;
}

}  // namespace zaya
