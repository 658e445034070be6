#include "train/trainer.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include <omp.h>
#include <nlohmann/json.hpp>

#include "backend/cpu/loss.h"
#include "ckpt/async_saver.h"
#include "core/error.h"
#include "data/loader.h"
#include "dist/dist_context.h"
#include "model/config.h"
#include "model/weights_io.h"
#include "model/zaya_model.h"
#include "optim/optimizer.h"
#include "optim/router_balancer.h"
#include "optim/schedule.h"
#include "tokenizer/tokenizer_files.h"
#include "train/metrics.h"
#include "train/plot.h"
#include "train/sampler.h"
#include "train/train_config.h"

namespace zaya {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::atomic<int> g_interrupts{0};
extern "C" void on_sigint(int) {
  // First Ctrl-C: finish the current step, evaluate, save, exit. Second: stop at once.
  if (g_interrupts.fetch_add(1) >= 1) std::_Exit(130);
}

std::string format_duration(double s) {
  char b[32];
  const int t = int(s + 0.5);
  if (t >= 3600)
    std::snprintf(b, sizeof(b), "%dh%02dm", t / 3600, t / 60 % 60);
  else
    std::snprintf(b, sizeof(b), "%dm%02ds", t / 60, t % 60);
  return b;
}

// Mean loss over the first eval_windows validation windows of every source, and the entropy of
// those windows' target tokens under their own unigram distribution (the best any unigram model
// could do on exactly these tokens).
struct EvalResult {
  double loss = 0, unigram = 0;
  int64_t tokens = 0;
};

EvalResult evaluate(ZayaModel& model, const DataLoader& loader, int seq_len, int windows,
                    int micro_batch) {
  std::vector<int32_t> window(size_t(seq_len) + 1), tokens, targets;
  std::map<int32_t, int64_t> counts;
  double loss_sum = 0;
  int64_t n_tokens = 0;
  std::vector<std::vector<int32_t>> batch;
  auto flush = [&] {
    if (batch.empty()) return;
    const int B = int(batch.size());
    tokens.assign(size_t(B) * seq_len, 0);
    targets.assign(size_t(B) * seq_len, 0);
    for (int b = 0; b < B; ++b)
      for (int s = 0; s < seq_len; ++s) {
        tokens[size_t(b) * seq_len + s] = batch[b][s];
        targets[size_t(b) * seq_len + s] = batch[b][s + 1];
      }
    const double l = model.forward(tokens, targets, B, seq_len);
    loss_sum += l * double(model.loss_count());
    n_tokens += model.loss_count();
    batch.clear();
  };
  for (int src = 0; src < loader.num_sources(); ++src) {
    const int64_t n = std::min<int64_t>(windows, loader.val_windows(src, seq_len));
    for (int64_t i = 0; i < n; ++i) {
      loader.val_sample(src, i, window);
      for (int s = 1; s <= seq_len; ++s) ++counts[window[s]];
      batch.push_back(window);
      if (int(batch.size()) == micro_batch) flush();
    }
  }
  flush();
  EvalResult r;
  ZAYA_CHECK(n_tokens > 0, "evaluation: the validation split has no window of ", seq_len + 1,
             " tokens; prepare data with a larger --val-fraction or use a shorter seq_len");
  r.loss = loss_sum / double(n_tokens);
  r.tokens = n_tokens;
  for (const auto& [tok, c] : counts) {
    const double p = double(c) / double(n_tokens);
    r.unigram -= p * std::log(p);
  }
  return r;
}

}  // namespace

TrainSummary run_training(const TrainOptions& opt) {
  const auto t_start = std::chrono::steady_clock::now();
  const std::string& path = opt.config_path;
  // Data-parallel training (ZeRO-1 over the Communicator) is the scale-out issue's next step;
  // until then several ranks would each train the same model into the same directory.
  const dist::LaunchInfo launch = dist::detect_launch();
  ZAYA_CHECK(launch.world_size == 1, "zaya train: launched as ", launch.world_size, " ranks (",
             launch.source, "), but data-parallel training is not built yet; run one process");
  const json root = read_config_file(path);
  ZAYA_CHECK(root.contains("model"), path, ": missing required section 'model'");
  const ModelConfig mc = model_config_from_json(root["model"], path);
  ZAYA_CHECK(root.contains("train"), path, ": missing section 'train' (zaya train needs it)");
  ZAYA_CHECK(root.contains("data"), path, ": missing section 'data' (zaya train needs it)");
  TrainConfig tc = train_config_from_json(root["train"], path);
  if (!opt.out_dir.empty()) tc.out_dir = opt.out_dir;
  if (opt.max_steps >= 0) tc.max_steps = opt.max_steps;
  const OptimConfig oc = optim_config_from_json(tc.optim, path);
  const DataConfig dc = data_config_from_json(root["data"], path);
  DataLoader loader(dc, tc.seed);
  ZAYA_CHECK(loader.vocab_size() <= mc.vocab_size, path, ": the data's tokenizer has ",
             loader.vocab_size(), " tokens but 'model.vocab_size' is ", mc.vocab_size);

  // The schedule's length follows from the phases' token budgets and the batch-size ramp;
  // max_steps stops a run early without reshaping the schedule.
  int64_t schedule_steps = 0;
  {
    int64_t tokens = 0;
    while (tokens < dc.total_tokens()) {
      const auto& phase = dc.phases[size_t(loader.phase_at(tokens))];
      tokens +=
          batch_sequences(oc, schedule_steps, tc.global_batch, tc.micro_batch) * phase.seq_len;
      ++schedule_steps;
    }
  }
  ZAYA_CHECK(schedule_steps > 0, path, ": the data phases hold no tokens to train on");
  const int64_t total_steps =
      tc.max_steps > 0 ? std::min(tc.max_steps, schedule_steps) : schedule_steps;

  fs::create_directories(tc.out_dir);
  TrainSummary sum;
  sum.out_dir = tc.out_dir;
  sum.metrics_path = (fs::path(tc.out_dir) / "metrics.jsonl").string();
  sum.plot_path = (fs::path(tc.out_dir) / "loss.svg").string();
  sum.model_dir = (fs::path(tc.out_dir) / "model").string();
  // Resume: the checkpoint is read before the metrics file is opened, so the metrics of steps
  // past the checkpoint (from the interrupted run) can be dropped and the rest continued.
  const std::string ckpt_root = (fs::path(tc.out_dir) / "ckpt").string();
  std::string resume_dir = opt.resume;
  if (resume_dir == "auto") {
    resume_dir = find_latest_checkpoint(
        ckpt_root, [](const std::string& msg) { std::fprintf(stderr, "%s\n", msg.c_str()); });
    if (resume_dir.empty())
      std::fprintf(stderr, "resume auto: no complete checkpoint under %s, starting from step 0\n",
                   ckpt_root.c_str());
  }
  LoadedCheckpoint resumed;
  if (!resume_dir.empty()) {
    resumed = load_checkpoint(resume_dir);
    ZAYA_CHECK(resumed.state.seed == tc.seed, "checkpoint ", resume_dir, ": saved with seed ",
               resumed.state.seed, " but 'train.seed' is ", tc.seed,
               "; the data order would differ, so the run could not continue exactly");
    ZAYA_CHECK(resumed.state.step <= total_steps, "checkpoint ", resume_dir, " is at step ",
               resumed.state.step, ", past this run's last step ", total_steps);
    sum.resumed_from = resume_dir;
    sum.resumed_step = resumed.state.step;
    std::vector<json> kept;
    if (fs::exists(sum.metrics_path))
      for (json& r : read_metrics(sum.metrics_path))
        if (r.value("step", int64_t(0)) <= resumed.state.step) kept.push_back(std::move(r));
    // Rewritten beside the original and renamed over it, so a crash here loses no saved line.
    const std::string tmp = sum.metrics_path + ".tmp";
    {
      std::ofstream rewrite(tmp);
      for (const json& r : kept) rewrite << r.dump() << "\n";
      ZAYA_CHECK(rewrite.good(), "writing '", tmp, "' failed (disk full?)");
    }
    fs::rename(tmp, sum.metrics_path);
  }
  MetricsWriter metrics(sum.metrics_path, !resume_dir.empty());

  ZayaModel model(mc);
  model.params().init(tc.seed);
  Optimizer optimizer(model.params().registry(), oc);
  RouterBalancer balancer(model.params().registry(), oc);
  const int n_moe = int(mc.num_moe_stages()), n_routes = int(mc.num_routes());
  int64_t g = 0, tokens_done = 0, step = 0;
  if (!resume_dir.empty()) {
    restore_checkpoint(resumed, model.params(), optimizer, balancer);
    step = resumed.state.step;
    g = resumed.state.sample_index;
    tokens_done = resumed.state.tokens_done;
    resumed.tensors.clear();  // the state now lives in the model and optimizer
    std::fprintf(stderr, "resumed from %s: step %lld, sample index %lld, %lld tokens\n",
                 resume_dir.c_str(), (long long)step, (long long)g, (long long)tokens_done);
  }
  ShardedCheckpoint checkpoints(ckpt_root, tc.keep_last, tc.keep_every);

  const bool tty = opt.progress && isatty(STDERR_FILENO);
  g_interrupts = 0;
  auto previous_handler = std::signal(SIGINT, on_sigint);
  std::fprintf(stderr, "train: %s -> %s, %lld steps, %lld tokens, %d threads\n", path.c_str(),
               tc.out_dir.c_str(), (long long)total_steps, (long long)dc.total_tokens(),
               omp_get_max_threads());

  std::vector<int32_t> window, tokens, targets;
  EvalResult last_eval;
  double train_s = 0;
  for (; step < total_steps; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    const int phase = loader.phase_at(tokens_done);
    const auto& ph = dc.phases[size_t(phase)];
    const int S = int(ph.seq_len);
    model.set_rope_theta(ph.rope_theta);
    const int64_t seqs = batch_sequences(oc, step, tc.global_batch, tc.micro_batch);
    const int micro_steps = int(seqs / tc.micro_batch);
    model.params().zero_grads();
    std::vector<RouteCounts> route_counts(size_t(n_moe), RouteCounts(size_t(n_routes), 0));
    double loss_sum = 0;
    window.resize(size_t(S) + 1);
    for (int m = 0; m < micro_steps; ++m) {
      const int B = tc.micro_batch;
      tokens.resize(size_t(B) * S);
      targets.resize(size_t(B) * S);
      for (int b = 0; b < B; ++b, ++g) {
        loader.sample(g, phase, window);
        std::copy_n(window.begin(), S, tokens.begin() + size_t(b) * S);
        std::copy_n(window.begin() + 1, S, targets.begin() + size_t(b) * S);
      }
      loss_sum += model.forward(tokens, targets, B, S);
      for (int k = 0; k < n_moe; ++k)
        accumulate_routes(route_counts[size_t(k)], model.routes(balancer.stage_of(k)));
      model.backward(1.0f / float(micro_steps));
    }
    const double lr = learning_rate(oc, step, schedule_steps);
    const double grad_norm = optimizer.step(model.params(), lr);
    balancer.update(model.params(), route_counts);
    tokens_done += seqs * S;
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    train_s += dt;
    const double loss = loss_sum / micro_steps;

    json rec = {{"step", step + 1},
                {"tokens", tokens_done},
                {"phase", ph.name},
                {"loss", loss},
                {"lr", lr},
                {"grad_norm", grad_norm},
                {"batch_sequences", seqs},
                {"seq_len", S},
                {"step_tokens", seqs * S},
                {"tokens_per_s", seqs * S / dt}};
    json load = json::array();
    for (const RouteCounts& counts : route_counts) load.push_back(expert_load(counts).fractions);
    rec["expert_load"] = load;
    const bool last = step + 1 == total_steps || g_interrupts > 0;
    if ((step + 1) % tc.eval_every == 0 || last) {
      last_eval = evaluate(model, loader, S, tc.eval_windows, tc.micro_batch);
      rec["val_loss"] = last_eval.loss;
    }
    metrics.write(rec);
    sum.final_loss = loss;

    const double eta = train_s / double(step + 1) * double(total_steps - step - 1);
    char val[32] = "";
    if (rec.contains("val_loss")) std::snprintf(val, sizeof(val), " | val %.4f", last_eval.loss);
    char line[256];
    std::snprintf(line, sizeof(line),
                  "step %lld/%lld | loss %.4f%s | %.0f tok/s | lr %.2e | gnorm %.2f | ETA %s",
                  (long long)(step + 1), (long long)total_steps, loss, val, seqs * S / dt, lr,
                  grad_norm, format_duration(eta).c_str());
    if (tty)
      std::fprintf(stderr, "\r\033[K%s", line);
    else if ((step + 1) % tc.log_every == 0 || last || rec.contains("val_loss"))
      std::fprintf(stderr, "%s\n", line);
    if (tc.checkpoint_every > 0 && ((step + 1) % tc.checkpoint_every == 0 || last)) {
      TrainerState st;
      st.step = step + 1;
      st.tokens_done = tokens_done;
      st.sample_index = g;
      st.seed = tc.seed;
      st.config = root;
      checkpoints.save(model.params(), optimizer, balancer, st);  // writes in the background
    }
    if (g_interrupts > 0) {
      sum.interrupted = true;
      ++step;
      break;
    }
  }
  if (tty) std::fprintf(stderr, "\n");
  std::signal(SIGINT, previous_handler);

  checkpoints.wait();  // the final save must be on disk before the run reports success
  sum.last_checkpoint = checkpoints.last_saved();
  sum.steps = step;
  sum.tokens = tokens_done;
  sum.final_val_loss = last_eval.loss;
  sum.unigram_val_loss = last_eval.unigram;
  save_model_dir(sum.model_dir, model);
  PlotOptions po;
  po.title = "zaya: " + fs::path(path).filename().string();
  po.baseline = last_eval.unigram;
  plot_loss_svg(sum.metrics_path, sum.plot_path, po);

  // Samples from the trained model.
  if (tc.sample_tokens > 0 && !tc.tokenizer.empty()) {
    const auto tok = load_tokenizer(tc.tokenizer);
    std::ofstream samples(fs::path(tc.out_dir) / "samples.txt");
    for (size_t i = 0; i < tc.sample_prompts.size(); ++i) {
      SampleOptions so;
      so.max_new_tokens = tc.sample_tokens;
      so.temperature = tc.sample_temperature;
      so.top_k = tc.sample_top_k;
      so.seed = tc.seed + i;
      so.stop_token = loader.eos_id();
      const auto ids = generate(model, tok->encode(tc.sample_prompts[i]), so);
      sum.samples.push_back(tok->decode(ids));
      samples << sum.samples.back() << "\n\n";
    }
  }
  sum.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  json summary = {{"steps", sum.steps},
                  {"tokens", sum.tokens},
                  {"final_loss", sum.final_loss},
                  {"final_val_loss", sum.final_val_loss},
                  {"unigram_val_loss", sum.unigram_val_loss},
                  {"interrupted", sum.interrupted},
                  {"elapsed_s", sum.elapsed_s}};
  std::ofstream(fs::path(tc.out_dir) / "summary.json") << summary.dump(2) << "\n";
  return sum;
}

}  // namespace zaya
