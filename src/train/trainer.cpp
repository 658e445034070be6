#include "train/trainer.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include <omp.h>
#include <nlohmann/json.hpp>

#include "backend/cpu/blas_startup.h"
#include "backend/cuda/plugin_api.h"
#include "backend/device_select.h"
#include "ckpt/async_saver.h"
#include "ckpt/hf_interop.h"
#include "core/error.h"
#include "data/loader.h"
#include "dist/communicator.h"
#include "dist/rank_grid.h"
#include "dist/rank_sum.h"
#include "model/config.h"
#include "model/context_shard.h"
#include "model/weights_io.h"
#include "model/zaya_model.h"
#include "optim/optimizer.h"
#include "optim/router_balancer.h"
#include "optim/schedule.h"
#include "optim/zero1_sync.h"
#include "tokenizer/tokenizer_files.h"
#include "train/evaluate.h"
#include "train/fault_injection.h"
#include "train/heartbeat.h"
#include "train/metrics.h"
#include "train/run_dir.h"
#include "train/run_outputs.h"
#include "train/skip_windows.h"
#include "train/thread_governor.h"
#include "train/train_config.h"

namespace zaya {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// SIGINT (Ctrl-C; what mpirun sends its ranks on Ctrl-C is SIGTERM), SIGTERM (Slurm before a time
// limit or preemption, a scheduler's stop) and SIGUSR1 (`sbatch --signal=USR1@T`) all ask the run
// to stop cleanly: finish the current step, save a checkpoint, write the outputs, exit 0. The
// ranks agree on it at the end of every step, so a signal to any one rank stops all of them at
// the same step. A second SIGINT stops at once (the checkpoints already written stay valid).
std::atomic<int> g_interrupts{0};
std::atomic<int> g_signal{0};
extern "C" void trainer_on_stop_signal(int sig) {
  if (g_interrupts.fetch_add(1) >= 1 && sig == SIGINT) std::_Exit(130);
  g_signal = sig;
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
    default:
      return "a signal";
  }
}

// Installs the stop handlers for the life of the training loop and restores the previous ones.
class StopSignals {
 public:
  StopSignals() {
    g_interrupts = 0;
    g_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = trainer_on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;  // a signal must not fail a write in progress with EINTR
    for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &sa, &previous_[i]);
  }
  ~StopSignals() {
    for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &previous_[i], nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  static constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGUSR1};
  std::array<struct sigaction, 3> previous_{};
};

std::string format_duration(double s) {
  char b[32];
  const int t = int(s + 0.5);
  if (t >= 3600)
    std::snprintf(b, sizeof(b), "%dh%02dm", t / 3600, t / 60 % 60);
  else
    std::snprintf(b, sizeof(b), "%dm%02ds", t / 60, t % 60);
  return b;
}

// Sequences per step of a phase: its own global_batch, or the run's.
int64_t phase_batch(const DataPhase& phase, const TrainConfig& tc) {
  return phase.global_batch > 0 ? phase.global_batch : tc.global_batch;
}

// The schedule's length follows from the phases' token budgets and the batch-size ramp.
int64_t schedule_length(const DataConfig& dc, const DataLoader& loader, const OptimConfig& oc,
                        const TrainConfig& tc, int64_t granule) {
  int64_t steps = 0, tokens = 0;
  while (tokens < dc.total_tokens()) {
    const auto& phase = dc.phases[size_t(loader.phase_at(tokens))];
    tokens += batch_sequences(oc, steps, phase_batch(phase, tc), granule) * phase.seq_len;
    ++steps;
  }
  return steps;
}

// Drops the metrics lines of steps past the checkpoint (written by the interrupted run). The file
// is rewritten beside the original and renamed over it, so a crash here loses no saved line.
void truncate_metrics(const std::string& path, int64_t last_step) {
  std::vector<json> kept;
  int torn = 0;
  if (fs::exists(path))
    for (json& r : read_metrics(path, &torn))
      if (r.value("step", int64_t(0)) <= last_step) kept.push_back(std::move(r));
  if (torn)
    std::fprintf(stderr, "%s: dropped a torn last line (the run was killed while writing it)\n",
                 path.c_str());
  const std::string tmp = path + ".tmp";
  {
    std::ofstream rewrite(tmp);
    for (const json& r : kept) rewrite << r.dump() << "\n";
    ZAYA_CHECK(rewrite.good(), "writing '", tmp, "' failed (disk full?)");
  }
  fs::rename(tmp, path);
}

}  // namespace

TrainSummary run_training(const TrainOptions& opt) {
  const auto t_start = std::chrono::steady_clock::now();
  const std::string& path = opt.config_path;
  const std::unique_ptr<dist::Communicator> comm_owner = dist::make_communicator();
  dist::Communicator* comm = comm_owner.get();
  const int world = comm->world_size(), rank = comm->rank();
  const bool lead = rank == 0;  // the rank that prints and writes run files

  const json root = read_config_file(path);
  ZAYA_CHECK(root.contains("model"), path, ": missing required section 'model'");
  const ModelConfig mc = model_config_from_json(root["model"], path);
  ZAYA_CHECK(root.contains("train"), path, ": missing section 'train' (zaya train needs it)");
  ZAYA_CHECK(root.contains("data"), path, ": missing section 'data' (zaya train needs it)");
  TrainConfig tc = train_config_from_json(root["train"], path);
  if (!opt.out_dir.empty()) tc.out_dir = opt.out_dir;
  if (opt.max_steps >= 0) tc.max_steps = opt.max_steps;
  if (opt.context_parallel >= 1) tc.context_parallel = opt.context_parallel;
  // The rank grid: world = data × context (dist/rank_grid.h).
  const int cp = tc.context_parallel;
  const dist::RankGrid grid =
      dist::make_rank_grid(*comm, cp, path, "train.context_parallel or --context-parallel");
  const int data_world = grid.data, data_rank = grid.data_rank;
  dist::Communicator* context_comm = grid.context_comm.get();
  const OptimConfig oc = optim_config_from_json(tc.optim, path);
  const DataConfig dc = data_config_from_json(root["data"], path);
  DataLoader loader(dc, tc.seed);
  ZAYA_CHECK(loader.vocab_size() <= mc.vocab_size, path, ": the data's tokenizer has ",
             loader.vocab_size(), " tokens but 'model.vocab_size' is ", mc.vocab_size);
  // Each data rank takes an equal, whole number of micro-batches of every step's batch (the
  // context ranks of one data rank share its sequences).
  const int64_t granule = int64_t(tc.micro_batch) * data_world;
  ZAYA_CHECK(tc.global_batch % granule == 0, path, ": 'train.global_batch' (", tc.global_batch,
             ") must be a multiple of 'train.micro_batch' (", tc.micro_batch, ") x ", data_world,
             cp > 1 ? " data-parallel ranks = " : " ranks = ", granule,
             ", so that every rank takes whole micro-batches");
  for (const DataPhase& ph : dc.phases)
    ZAYA_CHECK(ph.global_batch % granule == 0, path, ": data phase '", ph.name,
               "': 'global_batch' (", ph.global_batch, ") must be a multiple of ", granule,
               " ('train.micro_batch' x data-parallel ranks)");

  // max_steps stops a run early without reshaping the schedule.
  const int64_t schedule_steps = schedule_length(dc, loader, oc, tc, granule);
  ZAYA_CHECK(schedule_steps > 0, path, ": the data phases hold no tokens to train on");
  const int64_t total_steps =
      tc.max_steps > 0 ? std::min(tc.max_steps, schedule_steps) : schedule_steps;

  // Everything the run will need is checked before step 1, so that a bad config fails in seconds
  // rather than after the schedule: a validation window for every phase's length, the tokenizer
  // of the end-of-run samples.
  for (const DataPhase& ph : dc.phases) {
    int64_t windows = 0;
    for (int src = 0; src < loader.num_sources(); ++src)
      windows += loader.val_windows(src, int(ph.seq_len));
    ZAYA_CHECK(windows > 0, path, ": data phase '", ph.name, "' (seq_len ", ph.seq_len,
               "): no source's validation split has a window of ", ph.seq_len + 1,
               " tokens; prepare the data with a larger --val-fraction or use a shorter seq_len");
    ZAYA_CHECK(ph.seq_len >= ContextShard::min_seq_len(cp), path, ": data phase '", ph.name,
               "' (seq_len ", ph.seq_len, ") is too short for context parallel ", cp,
               ": its sequences are cut into ", 2 * cp, " chunks of at least ",
               ContextShard::kMinChunk,
               " tokens, so seq_len must be >= ", ContextShard::min_seq_len(cp));
  }
  // The device (backend/device_select.h): a bad name, a missing plugin or no GPU fails here.
  const ComputeDevice device = open_device(opt.device, opt.precision);
  ZAYA_CHECK(cp == 1 || device.backend->host_memory(), "--device ", device.name,
             ": context parallelism (train.context_parallel ", cp,
             ") runs on the CPU backend only so far; use --device cpu");
  // Loaded here, by the rank that samples, and kept for the samples at the end.
  std::unique_ptr<Tokenizer> sample_tokenizer;
  if (lead && tc.sample_tokens > 0 && !tc.tokenizer.empty()) {
    sample_tokenizer = load_tokenizer(tc.tokenizer);
    ZAYA_CHECK(sample_tokenizer->vocab_size() <= mc.vocab_size, path, ": 'train.tokenizer' ",
               tc.tokenizer, " has ", sample_tokenizer->vocab_size(),
               " tokens but 'model.vocab_size' is ", mc.vocab_size);
  }

  const std::string ckpt_root = (fs::path(tc.out_dir) / "ckpt").string();
  TrainSummary sum;
  sum.out_dir = tc.out_dir;
  sum.device = device.description;
  if (opt.resume.empty()) refuse_existing_run(tc.out_dir);  // every rank, before any rank writes
  if (opt.resume == "auto") {
    const auto finished = finished_run_steps(tc.out_dir);
    if (finished && *finished >= total_steps) {
      if (lead)
        std::fprintf(stderr,
                     "%s: this run already finished at step %lld (summary.json); nothing to do, "
                     "nothing changed\n",
                     tc.out_dir.c_str(), (long long)*finished);
      sum.already_finished = true;
      sum.steps = *finished;
      // A supervisor that restarted a job which had in fact finished sees it end at that step.
      HeartbeatWriter(tc.out_dir, rank).beat_phase("done", *finished, 0);
      return sum;
    }
  }
  if (lead) fs::create_directories(tc.out_dir);
  sum.metrics_path = (fs::path(tc.out_dir) / "metrics.jsonl").string();
  sum.plot_path = (fs::path(tc.out_dir) / "loss.svg").string();
  sum.model_dir = (fs::path(tc.out_dir) / "model").string();
  // Resume: every rank reads the checkpoint (of any world size) and keeps its own range of the
  // optimizer state. The checkpoint is read before the metrics file is opened, so the metrics of
  // steps past the checkpoint (from the interrupted run) can be dropped and the rest continued.
  std::string resume_dir = opt.resume;
  if (resume_dir == "auto") {
    // Collective: the ranks share the checksums of the files (each file is read by one rank).
    resume_dir = find_latest_checkpoint(
        ckpt_root,
        [&](const std::string& msg) {
          if (lead) std::fprintf(stderr, "%s\n", msg.c_str());
        },
        comm);
    // Damaged checkpoints are evidence, not garbage: starting over would let retention delete
    // them. Step 0 only when no checkpoint was ever committed here.
    ZAYA_CHECK(!resume_dir.empty() || !has_committed_checkpoints(ckpt_root),
               "--resume auto: every checkpoint under ", ckpt_root,
               " is damaged (see above); nothing was deleted. Resume from one of them with "
               "--resume DIR after repairing it, or move them away to start over from step 0");
    if (resume_dir.empty() && lead)
      std::fprintf(stderr, "resume auto: no complete checkpoint under %s, starting from step 0\n",
                   ckpt_root.c_str());
  }
  LoadedCheckpoint resumed;  // the header: the state is read into the model and optimizer below
  if (!resume_dir.empty()) {
    // Verified once: --resume auto's choice was just verified, a named one is verified here (the
    // checksums shared by the ranks); then only the manifest is read again.
    const bool verified = opt.resume == "auto";
    resumed = checkpoint_header(resume_dir, verify_checkpoint(resume_dir, comm, !verified));
    ZAYA_CHECK(resumed.state.seed == tc.seed, "checkpoint ", resume_dir, ": saved with seed ",
               resumed.state.seed, " but 'train.seed' is ", tc.seed,
               "; the data order would differ, so the run could not continue exactly");
    ZAYA_CHECK(resumed.state.step <= total_steps, "checkpoint ", resume_dir, " is at step ",
               resumed.state.step, ", past this run's last step ", total_steps);
    check_resume_config(resumed.state.config, root, resume_dir, opt.allow_changes,
                        [&](const std::string& msg) {
                          if (lead) std::fprintf(stderr, "%s\n", msg.c_str());
                        });
    sum.resumed_from = resume_dir;
    sum.resumed_step = resumed.state.step;
    if (lead) truncate_metrics(sum.metrics_path, resumed.state.step);
  }
  comm->barrier();  // the run directory exists and the metrics are truncated
  std::unique_ptr<MetricsWriter> metrics;
  if (lead) metrics = std::make_unique<MetricsWriter>(sum.metrics_path, !resume_dir.empty());

  ZayaModel model(mc);
  model.params().init(tc.seed);
  // bf16 weights (a GPU in bf16, or cpu-as-device standing in for one): kept in bf16 alone,
  // with the fp32 master weights of the optimizer's ZeRO-1 range (model/zaya_model.h).
  const ShardLayout optimizer_range{int64_t(model.params().size()), world, rank};
  if (opt.weight_storage == "bf16" && device.backend->bf16_weights() &&
      !device.backend->host_memory())
    model.set_bf16_weight_storage(size_t(optimizer_range.begin()), size_t(optimizer_range.end()),
                                  opt.gradient_storage == "bf16");
  model.set_backend(*device.backend);
  model.set_context_group(context_comm);
  model.set_recompute(tc.recompute);
  model.set_lm_head_chunks({tc.lm_head_chunk_tokens, tc.lm_head_chunk_vocab});
  if (!opt.init_from.empty() && resume_dir.empty()) {
    const LoadedModel init = load_model_any(opt.init_from);
    // Every field must match but rope_theta, which the data phases set anyway.
    const json want = model_config_to_json(mc), got = model_config_to_json(init.model->config());
    std::string differ;
    for (const auto& [key, value] : want.items())
      if (key != "rope_theta" && got.value(key, json()) != value)
        differ += " " + key + " (run " + value.dump() + ", weights " +
                  got.value(key, json()).dump() + ")";
    ZAYA_CHECK(differ.empty(), "--init-from ", init.path,
               ": the weights' model config differs from the run's 'model' section in", differ);
    std::copy_n(init.model->params().weights(), model.params().size(), model.params().weights());
    if (lead) {
      for (const std::string& w : init.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
      std::fprintf(stderr, "init from %s (%s): weights loaded, fresh optimizer state\n",
                   init.path.c_str(), init.kind.c_str());
    }
  }
  // The parameters, gradients and optimizer state live in the backend's memory for the whole
  // run (on a GPU: resident there, and nothing crosses per micro-batch but the tokens and the
  // experts' row counts; the host copies are refreshed for checkpoints and the end of the run;
  // on the CPU the pulls and pushes below do nothing). With several ranks ZeRO-1's buckets and
  // the Muon pieces move in that memory too: over NCCL on a GPU (sums in rank order,
  // backend/cuda/nccl_communicator.h), while the loss, the loads and the norm go over the host
  // communicator.
  const Backend& be = *device.backend;
  std::unique_ptr<dist::Communicator> nccl;
  if (device.name == "cuda" && world > 1)
    nccl = cuda_plugin().make_nccl_communicator(*comm, /*rank_order_sums=*/true);
  dist::Communicator* data_comm = nccl ? nccl.get() : comm;  // cpu-as-device: host memory
  Optimizer optimizer(model.params().registry(), oc, comm, &be, data_comm);
  ZAYA_CHECK(optimizer.shard().begin() == optimizer_range.begin() &&
                 optimizer.shard().end() == optimizer_range.end(),
             "train: the optimizer's range differs from the master weights' range");
  RouterBalancer balancer(model.params().registry(), oc);
  std::unique_ptr<Zero1Sync> zero1;
  BackendBuffer shard_grads;  // this rank's summed range, in the backend's memory
  if (world > 1) {
    zero1 = std::make_unique<Zero1Sync>(*data_comm, int64_t(model.params().size()),
                                        tc.zero1_bucket_floats, &be);
    shard_grads = BackendBuffer(be, sizeof(float) * size_t(zero1->layout().size()));
  }
  const int n_moe = int(mc.num_moe_stages()), n_routes = int(mc.num_routes());
  int64_t g = 0, tokens_done = 0, step = 0;
  if (!resume_dir.empty()) {
    const uint64_t read = restore_checkpoint_range(resumed, model.params(), optimizer, balancer);
    step = resumed.state.step;
    g = resumed.state.sample_index;
    tokens_done = resumed.state.tokens_done;
    if (lead)
      std::fprintf(stderr,
                   "resumed from %s (saved by %d rank%s, now %d): step %lld, sample "
                   "index %lld, %lld tokens; this rank read %.1f MiB\n",
                   resume_dir.c_str(), resumed.world_size, resumed.world_size == 1 ? "" : "s",
                   world, (long long)step, (long long)g, (long long)tokens_done,
                   double(read) / 1048576.0);
  }
  model.set_resident(true);  // sends the initial or restored weights over (off the host)
  // Where the step's weights and gradients are: the backend's copies (the ParamStore's on the
  // CPU).
  // With bf16 weight storage the optimizer updates the master weights of its range, and the
  // new values are stored (rounded to bf16 where the products read them) on every rank.
  const bool bf16_storage = model.bf16_weight_storage();
  float* const weights = bf16_storage ? model.master_weights() : model.backend_weights();
  // bf16 gradients (the Muon matrices'): read through the model into ZeRO-1's staging, or at one
  // rank into an fp32 buffer of them all for the optimizer.
  const bool bf16_grads = model.bf16_gradients();
  float* const grads = bf16_grads ? nullptr : model.backend_grads();
  const Zero1Sync::GradSource grad_source = [&model](int64_t offset, int64_t n, float* dst) {
    model.load_grads(size_t(offset), size_t(n), dst);
  };
  if (bf16_grads && !zero1) shard_grads = BackendBuffer(be, sizeof(float) * model.params().size());
  const Zero1Sync::WeightSink store = [&model](int64_t offset, const float* values, int64_t n) {
    model.store_weights(size_t(offset), size_t(n), values);
  };
  // At several ranks the gathered weights travel as bf16 (the fp32 tensors' values in fp32).
  Zero1Sync::WeightCodec codec;
  codec.fp32_count = [&model](int64_t offset, int64_t n) {
    return model.fp32_count(size_t(offset), size_t(n));
  };
  codec.pack = [&model](int64_t offset, int64_t n, const float* values, uint16_t* bf16,
                        float* fp32) {
    model.pack_weights(size_t(offset), size_t(n), values, bf16, fp32);
  };
  codec.store = [&model](int64_t offset, int64_t n, const uint16_t* bf16, const float* fp32) {
    model.store_packed_weights(size_t(offset), size_t(n), bf16, fp32);
  };
  codec.store_fp32 = store;
  std::vector<std::pair<size_t, size_t>> balancer_ranges;  // the biases the balancer writes
  for (const ParamSpec& p : model.params().registry().specs())
    if (p.group == OptimGroup::Buffer) balancer_ranges.emplace_back(p.offset, size_t(p.numel));
  // Aegis hooks (see src/aegis/): heartbeats for the supervisor, drills from ZAYA_FAULTS, and the
  // data windows a rollback skipped (the same on every rank: the mapping is a pure function).
  HeartbeatWriter heartbeat(tc.out_dir, rank);
  FaultInjector faults = FaultInjector::from_env(tc.out_dir, rank);
  const SkipWindows skip_windows = SkipWindows::load(tc.out_dir);
  heartbeat.beat_phase("start", step, g);
  ShardedCheckpoint checkpoints(ckpt_root, tc.keep_last, tc.keep_every, comm);
  // Drill "die in the middle of a checkpoint write": every rank file written, not yet committed.
  checkpoints.set_before_commit([&faults](int64_t s) { faults.in_checkpoint_write(s); });

  const bool tty = lead && opt.progress && isatty(STDERR_FILENO);
  // One line per committed checkpoint: an operator (and the Aegis drills) can tell which
  // checkpoint a crash will resume from.
  std::string announced = checkpoints.last_saved();
  auto announce_checkpoint = [&] {
    if (!lead || checkpoints.last_saved() == announced) return;
    announced = checkpoints.last_saved();
    std::fprintf(stderr, "%scheckpoint saved: %s\n", tty ? "\r\033[K" : "", announced.c_str());
  };
  StopSignals stop_signals;
  ThreadGovernor threads(opt.adaptive_threads, omp_get_max_threads());
  if (lead) {
    char grid[64] = "";
    if (cp > 1) std::snprintf(grid, sizeof(grid), " (data %d x context %d)", data_world, cp);
    std::fprintf(stderr, "train: %s -> %s, %lld steps, %lld tokens, %d rank%s%s x %d threads%s\n",
                 path.c_str(), tc.out_dir.c_str(), (long long)total_steps,
                 (long long)dc.total_tokens(), world, world == 1 ? "" : "s", grid,
                 omp_get_max_threads(),
                 threads.active() ? " (fewer while other work holds the CPU)" : "");
    std::fprintf(stderr, "%s\n", cpu::blas::blas_summary(cpu::blas::blas_state()).c_str());
    if (device.name != "cpu")
      std::fprintf(
          stderr, "device: %s; weights, gradients and optimizer state stay there%s%s\n",
          device.description.c_str(),
          !bf16_storage ? ""
          : bf16_grads  ? " (weights and Muon gradients in bf16, fp32 master weights of the "
                          "ZeRO-1 range)"
                        : " (weights in bf16, fp32 master weights of the ZeRO-1 range)",
          world > 1 ? (nccl ? " (ZeRO-1 and the Muon exchange over NCCL, sums in rank order)"
                            : " (ZeRO-1 and the Muon exchange over MPI)")
                    : "");
    if (zero1)
      std::fprintf(
          stderr,
          "ZeRO-1: %lld floats per rank shard; per step each rank sends %.1f MiB in "
          "reduce-scatter + all-gather (%lld buckets, the reduce-scatter %s) and %.1f KiB in the "
          "Muon exchange (split and rebalanced matrices)\n",
          (long long)zero1->layout().chunk(),
          double(bf16_storage ? zero1->bytes_per_step(codec) : zero1->bytes_per_step()) / 1048576.0,
          (long long)zero1->bucket_count(),
          tc.overlap_reduce ? "overlapping the backward" : "after the backward",
          double(optimizer.muon_exchange_bytes()) / 1024.0);
  }

  std::vector<int32_t> window, tokens, targets;
  std::vector<int64_t> samples;
  EvalResult last_eval;
  double train_s = 0;
  const int64_t first_step = step;
  for (; step < total_steps; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    const int step_threads = omp_get_max_threads();
    faults.at_step_start(step + 1);  // Aegis drills: kill, hang, slow
    const int phase = loader.phase_at(tokens_done);
    const auto& ph = dc.phases[size_t(phase)];
    const int S = int(ph.seq_len);
    model.set_rope_theta(ph.rope_theta);
    // The step's sequences are the next `seqs` global sample indices from g that no skipped window
    // holds; rank r takes the r-th slice.
    const int64_t seqs = batch_sequences(oc, step, phase_batch(ph, tc), granule);
    const int64_t g_begin = g;
    samples.clear();
    for (int64_t i = 0; i < seqs; ++i, ++g) {
      g = skip_windows.next_unskipped(g);
      samples.push_back(g);
    }
    const int64_t per_rank = seqs / data_world;
    const int micro_steps = int(per_rank / tc.micro_batch);
    model.zero_grads();
    // Aegis drill "NaN loss and gradients" overwrites the gradients after the backward, so that
    // step's reduce-scatter waits for it.
    const bool nan_drill = faults.loss_fault(step + 1);
    const bool overlap = zero1 && tc.overlap_reduce && !nan_drill;
    std::vector<int64_t> route_counts(size_t(n_moe) * size_t(n_routes), 0);
    double loss_sum = 0;
    window.resize(size_t(S) + 1);
    size_t mine = size_t(data_rank * per_rank);
    for (int m = 0; m < micro_steps; ++m) {
      const int B = tc.micro_batch;
      tokens.resize(size_t(B) * S);
      targets.resize(size_t(B) * S);
      for (int b = 0; b < B; ++b, ++mine) {
        loader.sample(samples[mine], phase, window);
        std::copy_n(window.begin(), S, tokens.begin() + size_t(b) * S);
        std::copy_n(window.begin() + 1, S, targets.begin() + size_t(b) * S);
      }
      // Under context parallelism the model computes this rank's chunks of the sequences.
      loss_sum += model.forward(tokens, targets, B, S);
      for (int k = 0; k < n_moe; ++k) {
        RouteCounts c(size_t(n_routes), 0);
        accumulate_routes(c, model.routes(balancer.stage_of(k)));
        for (int e = 0; e < n_routes; ++e) route_counts[size_t(k * n_routes + e)] += c[size_t(e)];
      }
      // Every micro-batch loss is a mean over its tokens; the step's loss is their mean over
      // all data ranks, so each backward carries 1 / (micro-batches of the whole step). Context
      // ranks each hold a share of their micro-batch's gradient; the reduction sums the shares.
      // The last micro-batch's backward finishes the gradients stage by stage, from the end of
      // the flat buffer down: ZeRO-1's buckets start moving as their stages are done.
      const bool last_micro = m + 1 == micro_steps;
      if (overlap && last_micro) {
        if (bf16_grads)
          zero1->begin_reduce(grad_source, shard_grads.floats());
        else
          zero1->begin_reduce(grads, shard_grads.floats());
        model.set_gradients_final([&zero1](int64_t from) { zero1->grads_final_from(from); });
      }
      model.backward(1.0f / float(micro_steps * data_world));
      if (overlap && last_micro) model.set_gradients_final(nullptr);
      // Fewer threads while other work holds the CPU, decided after each micro-batch (a step
      // can be long): the numbers are the same at any thread count.
      const std::string thread_change = threads.tick(step + 1);
      if (lead && !thread_change.empty())
        std::fprintf(stderr, "%s%s\n", tty ? "\r\033[K" : "", thread_change.c_str());
    }
    if (nan_drill) {  // Aegis drill: NaN loss and gradients (update skipped)
      loss_sum = std::numeric_limits<double>::quiet_NaN();
      model.fill_grads(std::nanf(""));
    }
    // This rank's own work, before it waits for the others (stragglers show up in heartbeats).
    const double own_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // The gradients' reduce-scatter first: every rank has started all of its buckets before it
    // blocks in a host collective. (With NCCL a rank whose GPU waits for a bucket another rank
    // has not started, while that rank waits in MPI for this one, would never move.)
    if (zero1) {
      const auto r0 = std::chrono::steady_clock::now();
      if (overlap)
        zero1->finish_reduce();
      else if (bf16_grads)
        zero1->reduce_scatter_grads(grad_source, shard_grads.floats());
      else
        zero1->reduce_scatter_grads(grads, shard_grads.floats());
      sum.grad_reduce_wait_s +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
    }
    // Global figures: the loss and the routers' loads over every rank's micro-batches.
    dist::sum_over_ranks(comm, std::span<double>(&loss_sum, 1));
    dist::sum_over_ranks(comm, route_counts);
    const double lr = learning_rate(oc, step, schedule_steps);
    double grad_norm = 0;
    if (bf16_storage) {
      float* step_grads = zero1 ? shard_grads.floats() : grads;
      if (bf16_grads && !zero1) {  // one rank: its range is every gradient, widened to fp32
        model.load_grads(0, model.params().size(), shard_grads.floats());
        step_grads = shard_grads.floats();
      }
      grad_norm = optimizer.step_shard(weights, step_grads, lr);
      if (zero1)
        zero1->all_gather_weights(weights, codec);
      else
        store(0, weights, int64_t(model.params().size()));
    } else if (zero1) {
      grad_norm = optimizer.step(weights, shard_grads.floats(), lr);
      zero1->all_gather_weights(weights);
    } else {
      grad_norm = optimizer.step(weights, grads, lr);
    }
    std::vector<RouteCounts> stage_counts(static_cast<size_t>(n_moe));
    for (int k = 0; k < n_moe; ++k)
      stage_counts[size_t(k)].assign(route_counts.begin() + k * n_routes,
                                     route_counts.begin() + (k + 1) * n_routes);
    balancer.update(model.params(), stage_counts);  // same counts on every rank: same biases
    // The host holds the biases' master copy: the backend gets the new ones.
    for (const auto& [offset, n] : balancer_ranges) model.push_weights(offset, n);
    tokens_done += seqs * S;
    // Every context rank of a data rank holds the same (group-wide) loss: world = data × context.
    const double loss = loss_sum / double(micro_steps * world);
    int64_t stop = g_interrupts > 0 ? 1 : 0;  // a signal to any rank stops every rank
    dist::sum_over_ranks(comm, std::span<int64_t>(&stop, 1));
    if (stop > 0 && sum.stop_signal.empty()) {
      sum.stop_signal = g_signal != 0 ? signal_name(g_signal) : "a signal to another rank";
      if (lead)
        std::fprintf(stderr, "%sstopping after step %lld (%s): saving a checkpoint\n",
                     tty ? "\r\033[K" : "", (long long)(step + 1), sum.stop_signal.c_str());
    }
    const bool last = step + 1 == total_steps || stop > 0;
    // A stop by signal skips the end-of-run evaluation: the time before the scheduler's SIGKILL
    // goes to the checkpoint.
    const bool eval = (step + 1) % tc.eval_every == 0 || (last && stop == 0);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    train_s += dt;
    if (eval) {
      try {
        last_eval = evaluate(model, loader, S, tc.eval_windows, tc.micro_batch,
                             cp > 1 ? grid.data_comm.get() : comm);
      } catch (const Error& e) {
        if (!last) throw;  // the last step's evaluation may not cost the run its final save
        if (lead) std::fprintf(stderr, "warning: the final evaluation failed: %s\n", e.what());
      }
    }
    sum.final_loss = loss;

    if (lead) {
      json rec = {{"step", step + 1},
                  {"tokens", tokens_done},
                  {"phase", ph.name},
                  {"loss", loss},
                  {"lr", lr},
                  {"grad_norm", grad_norm},
                  {"batch_sequences", seqs},
                  {"seq_len", S},
                  {"step_tokens", seqs * S},
                  {"tokens_per_s", seqs * S / dt},
                  {"threads", step_threads}};
      json load = json::array();
      for (const RouteCounts& counts : stage_counts) load.push_back(expert_load(counts).fractions);
      rec["expert_load"] = load;
      if (eval) rec["val_loss"] = last_eval.loss;
      metrics->write(rec);
      const double eta =
          train_s / double(step + 1 - sum.resumed_step) * double(total_steps - step - 1);
      char val[32] = "";
      if (eval) std::snprintf(val, sizeof(val), " | val %.4f", last_eval.loss);
      char line[256];
      std::snprintf(line, sizeof(line),
                    "step %lld/%lld | loss %.4f%s | %.0f tok/s | lr %.2e | gnorm %.2f | ETA %s",
                    (long long)(step + 1), (long long)total_steps, loss, val, seqs * S / dt, lr,
                    grad_norm, format_duration(eta).c_str());
      if (tty)
        std::fprintf(stderr, "\r\033[K%s", line);
      else if ((step + 1) % tc.log_every == 0 || last || eval)
        std::fprintf(stderr, "%s\n", line);
    }
    heartbeat.beat_step(step + 1, loss, grad_norm, own_s, g_begin, g);
    checkpoints.poll();  // commits a save once every rank has written its file
    announce_checkpoint();
    // A stop by signal always saves, even in a run configured without checkpoints.
    if ((tc.checkpoint_every > 0 && ((step + 1) % tc.checkpoint_every == 0 || last)) || stop > 0) {
      TrainerState st;
      st.step = step + 1;
      st.tokens_done = tokens_done;
      st.sample_index = g;
      st.seed = tc.seed;
      st.config = root;
      model.pull_weights();  // the host copies the checkpoint is written from
      optimizer.pull_state();
      checkpoints.save(model.params(), optimizer, balancer, st);  // writes in the background
    }
    if (stop > 0) {
      sum.interrupted = true;
      ++step;
      break;
    }
  }
  if (tty) std::fprintf(stderr, "\n");

  if (step == first_step && lead && fs::exists(sum.metrics_path)) {
    // Resumed from the final checkpoint of a run that died before its outputs: no step ran here,
    // so the losses come from the metrics the run wrote.
    for (const json& r : read_metrics(sum.metrics_path)) {
      sum.final_loss = r.value("loss", sum.final_loss);
      if (r.contains("val_loss")) last_eval.loss = r["val_loss"].get<double>();
    }
  }
  heartbeat.beat_phase("checkpoint", step, g);
  checkpoints.wait();  // the final save must be on disk before the run reports success
  announce_checkpoint();
  sum.last_checkpoint = checkpoints.last_saved();
  sum.steps = step;
  sum.train_s = train_s;
  sum.tokens = tokens_done;
  sum.final_val_loss = last_eval.loss;
  sum.unigram_val_loss = last_eval.unigram;
  model.set_context_group(nullptr);  // the end-of-run samples decode whole sequences on rank 0
  model.pull_weights();              // the saved model and the samples read the host copy
  if (bf16_storage && zero1)  // whose weights outside this rank's range are the other masters'
    zero1->all_gather_weights(weights, [&](int64_t offset, const float* values, int64_t n) {
      be.to_host(model.params().weights() + offset, values, sizeof(float) * size_t(n));
    });
  if (lead) write_run_outputs(sum, model, tc, sample_tokenizer.get(), loader.eos_id(), path);
  // Every rank's peak resident memory (KiB from getrusage), for the summary.
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  const int64_t own_rss = int64_t(usage.ru_maxrss) * 1024;
  sum.activation_bytes = int64_t(model.arena_high_water());
  sum.device_weight_bytes = int64_t(model.weight_bytes());
  sum.device_grad_bytes = int64_t(model.grad_bytes());
  sum.peak_rss_bytes.assign(size_t(world), 0);
  static_assert(sizeof(int64_t) == 2 * sizeof(int32_t));  // moved as two int32 (bytes only)
  comm->all_gather(&own_rss, sum.peak_rss_bytes.data(), 2, DType::I32);
  comm->barrier();  // the run's files are complete when any rank returns
  sum.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  if (lead) write_run_summary(sum);
  heartbeat.beat_phase("done", step, g);
  return sum;
}

}  // namespace zaya
