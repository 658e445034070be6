// `zaya train` (trainer.h): the run plan (train/run_plan.h) decides everything that can refuse the
// run; this file builds the model and its parameter update on the plan's device and runs the
// loop. One step of the loop is the algorithm:
//   sample    the step's global sample indices, this rank's slice of them
//   forward/backward over its micro-batches, accumulating gradients
//   update    reduce-scatter, AdamW + Muon, all-gather (optim/parameter_update.h); router biases
//   log       metrics.jsonl, the progress line, the heartbeat
//   evaluate  every eval_every steps and at the end; the "eval" section's tasks on their cadence
//   checkpoint every checkpoint_every steps, at the end and on a stop signal
#include "train/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <limits>

#include <omp.h>
#include <nlohmann/json.hpp>

#include "backend/blas_report.h"
#include "backend/vector_path.h"
#include "ckpt/async_saver.h"
#include "core/clock.h"
#include "core/error.h"
#include "dist/rank_sum.h"
#include "dist/traced_communicator.h"
#include "model/weights_io.h"
#include "model/zaya_model.h"
#include "optim/parameter_update.h"
#include "optim/router_balancer.h"
#include "optim/schedule.h"
#include "train/evaluate.h"
#include "train/fault_injection.h"
#include "train/heartbeat.h"
#include "train/init_from.h"
#include "train/metrics.h"
#include "train/run_outputs.h"
#include "train/run_plan.h"
#include "train/run_world.h"
#include "train/skip_windows.h"
#include "train/step_accounting.h"
#include "train/stop_signals.h"
#include "train/thread_governor.h"

namespace zaya {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// The sequences of one optimizer step.
struct StepBatch {
  int phase = 0;
  const DataPhase* ph = nullptr;
  int S = 0;            // sequence length
  int64_t seqs = 0;     // sequences over every data rank
  int64_t g_begin = 0;  // the first global sample index drawn (the heartbeat's data window)
  int micro_steps = 0;  // this rank's micro-batches
};

// What one step measured.
struct StepOutcome {
  double loss = 0;  // the step's mean loss over every rank's micro-batches
  double lr = 0, grad_norm = 0;
  std::vector<RouteCounts> stage_counts;  // every rank's route counts per MoE stage
  double own_s = 0;                       // this rank's own work before it waited for others
  double dt = 0;                          // the whole step
  StepTimes times;                        // where its wall time went (train/step_accounting.h)
  bool stop = false;                      // a stop signal reached some rank
};

class TrainingRun {
 public:
  TrainingRun(RunPlan& plan, const TrainOptions& opt, RunWorld& world, TrainSummary& sum)
      : p_(plan),
        opt_(opt),
        run_world_(world),
        comm_(*world.comm),
        sum_(sum),
        tc_(plan.train),
        rank_(comm_.rank()),
        world_(comm_.world_size()),
        lead_(rank_ == 0),
        model_(plan.model),
        heartbeat_(plan.train.out_dir, rank_),
        faults_(FaultInjector::from_env(plan.train.out_dir, rank_)),
        skip_windows_(SkipWindows::load(plan.train.out_dir)) {}

  void build();  // the model and its update on the plan's device, restored or initialised
  // The loop and the end of the run (t_start: when the command started, for the summary).
  void run(Clock::time_point t_start);

 private:
  void restore();
  void print_header() const;
  StepBatch sample();
  double forward_backward(const StepBatch& b, std::vector<int64_t>& route_counts, bool nan_drill,
                          StepTimes& times);
  StepOutcome update(const StepBatch& b, double loss_sum, std::vector<int64_t>& route_counts,
                     const StepTimes& times_so_far);
  bool agree_on_stop(StepTimes& times);
  void log(const StepBatch& b, const StepOutcome& o, int threads, bool eval, bool tasks, bool last);
  void checkpoint(bool last, bool stop);
  void finish(int64_t first_step, Clock::time_point t_start);
  void announce_checkpoint();
  const char* erase_line() const { return tty_ ? "\r\033[K" : ""; }

  RunPlan& p_;
  const TrainOptions& opt_;
  RunWorld& run_world_;  // the world's communicator and its watchdog
  dist::Communicator& comm_;
  TrainSummary& sum_;
  const TrainConfig& tc_;
  const int rank_, world_;
  const bool lead_;  // the rank that prints and writes run files
  ZayaModel model_;
  std::unique_ptr<MetricsWriter> metrics_;
  std::unique_ptr<dist::Communicator> nccl_;
  std::unique_ptr<ParameterUpdate> update_;
  std::unique_ptr<RouterBalancer> balancer_;
  std::vector<std::pair<size_t, size_t>> balancer_ranges_;  // the biases the balancer writes
  // Aegis hooks (src/aegis/): heartbeats, drills (ZAYA_FAULTS), data windows a rollback skipped.
  HeartbeatWriter heartbeat_;
  FaultInjector faults_;
  const SkipWindows skip_windows_;
  std::unique_ptr<ShardedCheckpoint> checkpoints_;
  std::string announced_;  // the last checkpoint the log named
  bool tty_ = false;
  std::unique_ptr<ThreadGovernor> threads_;
  std::unique_ptr<StopSignals> stop_signals_;
  int64_t g_ = 0, tokens_done_ = 0, step_ = 0;  // next sample index, tokens trained, steps done
  std::vector<int32_t> window_, tokens_, targets_;
  std::vector<int64_t> samples_;
  EvalResult last_eval_;
  double train_s_ = 0;
  std::unique_ptr<StepAccounting> accounting_;  // FLOPs, MFU, times, routers: see log()
  double last_checkpoint_s_ = 0;     // the save after the previous step, for the next record
  Clock::time_point last_record_;    // when the previous step's record was made (time_s.wall)
  std::unique_ptr<RunTrace> trace_;  // --trace
};

void TrainingRun::build() {
  if (lead_)
    metrics_ =
        std::make_unique<MetricsWriter>(p_.metrics_path, !p_.resume_dir.empty(), opt_.on_record);
  model_.params().init(tc_.seed);
  const Backend& be = *p_.device.backend;
  ParameterPlacement& placement = model_.placement();
  // bf16 weights (a GPU in bf16, or cpu-as-device standing in for one): kept in bf16 alone
  // (model/parameter_placement.h), with the fp32 master weights of the optimizer's ZeRO-1 range
  // beside them (ParameterUpdate, optim/master_weights.h).
  if (opt_.weight_storage == StoredAs::kBf16 && be.bf16_weights() && !be.host_memory())
    placement.set_bf16_weight_storage(opt_.gradient_storage == StoredAs::kBf16);
  // ZeRO-2 (ParameterUpdate): the gradients on demand from their first allocation, so that they
  // are never whole beside the optimizer state.
  if (tc_.zero_stage == 2 && comm_.world_size() > 1) placement.set_gradients_on_demand(true);
  model_.set_backend(be);
  model_.set_context_group(p_.grid.context_comm.get());
  model_.set_recompute(tc_.recompute);
  model_.set_activation_storage(opt_.activation_storage == StoredAs::kBf16
                                    ? ActivationStorage::kBf16
                                    : ActivationStorage::kFp32);
  if (!be.host_memory()) model_.reserve_activations(p_.activations.step, p_.activations.transient);
  model_.set_lm_head_chunks({tc_.lm_head_chunk_tokens, tc_.lm_head_chunk_vocab});
  if (!opt_.init_from.empty() && p_.resume_dir.empty())
    load_init_weights(opt_.init_from, p_.model, model_.params(), lead_);
  // The parameters, gradients and optimizer state live in the backend's memory for the whole
  // run (on a GPU nothing crosses per micro-batch but the tokens and the experts' row counts;
  // the host copies are refreshed for checkpoints and the run's end). With several ranks
  // ZeRO-1's buckets and the Muon pieces move in that memory too, over the device's own
  // collectives where it has them (NCCL, sums in rank order, backend/cuda/nccl_communicator.h);
  // the loss, the loads and the norm go over the host communicator.
  if (world_ > 1)
    nccl_ =
        run_world_.wrap_device(p_.device.make_collective(comm_, /*rank_order_sums=*/true), opt_);
  update_ =
      std::make_unique<ParameterUpdate>(placement, p_.optim, &comm_, nccl_ ? nccl_.get() : &comm_,
                                        tc_.zero1_bucket_floats, tc_.zero_stage);
  balancer_ = std::make_unique<RouterBalancer>(model_.params().registry(), p_.optim);
  if (!p_.resume_dir.empty()) restore();
  placement.set_resident(true);    // sends the initial or restored weights over (off the host)
  update_->load_master_weights();  // bf16 weight storage: the master range's restored values
  for (const ParamSpec& ps : model_.params().registry().specs())
    if (ps.group == OptimGroup::Buffer) balancer_ranges_.emplace_back(ps.offset, size_t(ps.numel));
  heartbeat_.beat_phase(BeatPhase::kStart, step_, g_);
  checkpoints_ =
      std::make_unique<ShardedCheckpoint>(p_.ckpt_root, tc_.keep_last, tc_.keep_every, &comm_);
  // Drill "die in the middle of a checkpoint write": every rank file written, not yet committed.
  checkpoints_->set_before_commit([this](int64_t s) { faults_.in_checkpoint_write(s); });
  tty_ = lead_ && opt_.progress && isatty(STDERR_FILENO);
  // One line per committed checkpoint: an operator (and the Aegis drills) can tell which
  // checkpoint a crash will resume from.
  announced_ = checkpoints_->last_saved();
  if (!opt_.trace_path.empty())
    trace_ = std::make_unique<RunTrace>(opt_.trace_path, opt_.trace_steps, comm_);
}

void TrainingRun::restore() {
  const LoadedCheckpoint& resumed = p_.resumed;
  const uint64_t read =
      restore_checkpoint_range(resumed, model_.params(), update_->optimizer(), *balancer_);
  step_ = resumed.state.step;
  g_ = resumed.state.sample_index;
  tokens_done_ = resumed.state.tokens_done;
  sum_.resumed_from = p_.resume_dir;
  sum_.resumed_step = resumed.state.step;
  if (lead_)
    std::fprintf(stderr,
                 "resumed from %s (saved by %d rank%s, now %d): step %lld, sample "
                 "index %lld, %lld tokens; this rank read %.1f MiB\n",
                 p_.resume_dir.c_str(), resumed.world_size, resumed.world_size == 1 ? "" : "s",
                 world_, (long long)step_, (long long)g_, (long long)tokens_done_,
                 double(read) / 1048576.0);
}

void TrainingRun::print_header() const {
  if (!lead_) return;
  const int cp = tc_.context_parallel;
  char grid[64] = "";
  if (cp > 1) std::snprintf(grid, sizeof(grid), " (data %d x context %d)", p_.grid.data, cp);
  std::fprintf(stderr, "train: %s -> %s, %lld steps, %lld tokens, %d rank%s%s x %d threads%s\n",
               p_.config_path.c_str(), tc_.out_dir.c_str(), (long long)p_.total_steps,
               (long long)p_.data.total_tokens(), world_, world_ == 1 ? "" : "s", grid,
               omp_get_max_threads(),
               threads_->active() ? " (fewer while other work holds the CPU)" : "");
  std::fprintf(stderr, "%s\n", blas_summary_line().c_str());
  std::fprintf(stderr, "%s\n", vector_path_summary_line().c_str());
  const ParameterPlacement& placement = model_.placement();
  if (p_.device.caps().own_memory)
    std::fprintf(
        stderr, "device: %s; weights, gradients and optimizer state stay there%s%s%s\n%s",
        p_.device.description.c_str(),
        !placement.bf16_weight_storage() ? ""
        : placement.bf16_gradients()
            ? " (weights and Muon gradients in bf16, fp32 master weights of the ZeRO-1 range)"
            : " (weights in bf16, fp32 master weights of the ZeRO-1 range)",
        world_ > 1 ? (nccl_ ? " (ZeRO-1 and the Muon exchange over NCCL, sums in rank order)"
                            : " (ZeRO-1 and the Muon exchange over MPI)")
                   : "",
        model_.activation_storage() == ActivationStorage::kBf16
            ? "; activations stored in bf16 (computed in fp32)"
            : "",
        p_.device_memory_line.c_str());
  if (update_->zero1())
    std::fprintf(stderr, "%s\n", update_->zero1_summary(tc_.overlap_reduce).c_str());
  else if (tc_.zero_stage == 2)
    std::fprintf(stderr, "ZeRO-2: one rank, nothing to shard (the gradients stay whole)\n");
}

// The step's sequences are the next `seqs` global sample indices from g that no skipped window
// holds; rank r takes the r-th slice.
StepBatch TrainingRun::sample() {
  StepBatch b;
  b.phase = p_.loader->phase_at(tokens_done_);
  b.ph = &p_.data.phases[size_t(b.phase)];
  b.S = int(b.ph->seq_len);
  b.seqs = batch_sequences(p_.optim, step_, phase_batch(*b.ph, tc_), p_.granule);
  b.g_begin = g_;
  samples_.clear();
  for (int64_t i = 0; i < b.seqs; ++i, ++g_) {
    g_ = skip_windows_.next_unskipped(g_);
    samples_.push_back(g_);
  }
  b.micro_steps = int(b.seqs / p_.grid.data / tc_.micro_batch);
  return b;
}

// This rank's micro-batches: forward, route counts, backward (gradients accumulate). Returns the
// sum of their losses.
double TrainingRun::forward_backward(const StepBatch& b, std::vector<int64_t>& route_counts,
                                     bool nan_drill, StepTimes& times) {
  PartClock clock;
  const int n_moe = int(p_.model.num_moe_stages()), n_routes = int(p_.model.num_routes());
  const int S = b.S, B = tc_.micro_batch;
  const bool overlap = update_->zero1() && tc_.overlap_reduce && !nan_drill;
  double loss_sum = 0;
  window_.resize(size_t(S) + 1);
  // The lead rank's accounting reads the routers' per-token health from this step's forwards.
  if (accounting_)
    model_.set_router_logits_observer([this](int k, std::span<const float> logits, int routes) {
      accounting_->observe_router_logits(k, logits, routes);
    });
  size_t mine = size_t(p_.grid.data_rank * (b.seqs / p_.grid.data));
  for (int m = 0; m < b.micro_steps; ++m) {
    tokens_.resize(size_t(B) * S);
    targets_.resize(size_t(B) * S);
    for (int k = 0; k < B; ++k, ++mine) {
      p_.loader->sample(samples_[mine], b.phase, window_);
      std::copy_n(window_.begin(), S, tokens_.begin() + size_t(k) * S);
      std::copy_n(window_.begin() + 1, S, targets_.begin() + size_t(k) * S);
    }
    clock.mark(times.data_s, "data");
    // Under context parallelism the model computes this rank's chunks of the sequences.
    loss_sum += model_.forward(tokens_, targets_, B, S);
    for (int k = 0; k < n_moe; ++k) {
      RouteCounts c(size_t(n_routes), 0);
      accumulate_routes(c, model_.routes(balancer_->stage_of(k)));
      for (int e = 0; e < n_routes; ++e) route_counts[size_t(k * n_routes + e)] += c[size_t(e)];
    }
    clock.mark(times.forward_s, "forward");
    // Every micro-batch loss is a mean over its tokens; the step's loss is their mean over
    // all data ranks, so each backward carries 1 / (micro-batches of the whole step). Context
    // ranks each hold a share of their micro-batch's gradient; the reduction sums the shares.
    // The last micro-batch's backward finishes the gradients stage by stage, from the end of
    // the flat buffer down: ZeRO-1's buckets start moving as their stages are done.
    // With ZeRO-2 every backward is reduced so (its gradients' memory given back as they move).
    const bool last_micro = m + 1 == b.micro_steps, each = update_->reduces_each_backward();
    std::function<void(int64_t)> final_from;
    if (each)
      final_from = update_->begin_backward_reduce(m == 0);
    else if (overlap && last_micro)
      final_from = update_->begin_overlapped_reduce();
    if (tc_.overlap_reduce) model_.set_gradients_final(std::move(final_from));
    model_.backward(1.0f / float(b.micro_steps * p_.grid.data));
    model_.set_gradients_final(nullptr);
    clock.mark(times.backward_s, "backward");
    if (each) {
      sum_.grad_reduce_wait_s += update_->finish_backward_reduce();
      clock.mark(times.reduce_wait_s, "reduce_wait");
    }
    // Fewer threads while other work holds the CPU, decided per micro-batch (same numbers).
    const std::string thread_change = threads_->tick(step_ + 1);
    if (lead_ && !thread_change.empty())
      std::fprintf(stderr, "%s%s\n", erase_line(), thread_change.c_str());
  }
  model_.set_router_logits_observer({});  // evaluation's forwards are not the step's
  return loss_sum;
}

// The gradients reduced, the parameters and the routers' biases updated.
StepOutcome TrainingRun::update(const StepBatch& b, double loss_sum,
                                std::vector<int64_t>& route_counts, const StepTimes& times_so_far) {
  const int n_moe = int(p_.model.num_moe_stages()), n_routes = int(p_.model.num_routes());
  StepOutcome o;
  o.times = times_so_far;
  PartClock clock;
  // The gradients' reduce-scatter first: every rank has started all of its buckets before it
  // blocks in a host collective (with NCCL, a rank whose GPU waits for a bucket another rank has
  // not started, while that rank waits in MPI for this one, would never move).
  sum_.grad_reduce_wait_s += update_->reduce_gradients();
  clock.mark(o.times.reduce_wait_s, "reduce_wait");
  // Global figures: the loss and the routers' loads over every rank's micro-batches.
  dist::sum_over_ranks(&comm_, std::span<double>(&loss_sum, 1));
  dist::sum_over_ranks(&comm_, route_counts);
  clock.mark(o.times.sums_s, "sums");
  o.lr = learning_rate(p_.optim, step_, p_.schedule_steps);
  o.grad_norm = update_->step(o.lr);
  clock.mark(o.times.optimizer_s, "optimizer");
  o.stage_counts.resize(size_t(n_moe));
  for (int k = 0; k < n_moe; ++k)
    o.stage_counts[size_t(k)].assign(route_counts.begin() + k * n_routes,
                                     route_counts.begin() + (k + 1) * n_routes);
  balancer_->update(model_.params(), o.stage_counts);  // same counts on every rank: same biases
  // The host holds the biases' master copy: the backend gets the new ones.
  for (const auto& [offset, n] : balancer_ranges_) update_->push_weights(offset, n);
  clock.mark(o.times.router_s, "router");
  tokens_done_ += b.seqs * b.S;
  // Every context rank of a data rank holds the same (group-wide) loss: world = data × context.
  o.loss = loss_sum / double(b.micro_steps * world_);
  return o;
}

// A signal to any rank stops every rank, after the same step (a sum over the ranks: `sums`).
bool TrainingRun::agree_on_stop(StepTimes& times) {
  PartClock clock;
  int64_t stop = stop_signals_->requested() ? 1 : 0;
  dist::sum_over_ranks(&comm_, std::span<int64_t>(&stop, 1));
  clock.mark(times.sums_s, "sums");
  return stop > 0;
}

// metrics.jsonl (lead rank), the progress line, the heartbeat.
void TrainingRun::log(const StepBatch& b, const StepOutcome& o, int threads, bool eval, bool tasks,
                      bool last) {
  const int64_t step_tokens = b.seqs * b.S;
  json rec;
  if (accounting_) {  // the lead rank's, and each rank's where they serve metrics (on_record)
    rec = {{"step", step_ + 1},
           {"tokens", tokens_done_},
           {"phase", b.ph->name},
           {"loss", o.loss},
           {"lr", o.lr},
           {"grad_norm", o.grad_norm},
           {"batch_sequences", b.seqs},
           {"seq_len", b.S},
           {"step_tokens", step_tokens},
           {"tokens_per_s", step_tokens / o.dt},
           {"threads", threads}};
    json load = json::array();
    for (const RouteCounts& counts : o.stage_counts) load.push_back(expert_load(counts).fractions);
    rec["expert_load"] = load;
    accounting_->add_to(rec, step_tokens, b.S, o.dt, o.times, o.stage_counts);
  }
  if (accounting_ && !lead_) opt_.on_record(rec);  // this rank's own series (--metrics-port)
  if (lead_) {
    if (eval) rec["val_loss"] = last_eval_.loss;
    if (tasks) rec["tasks"] = p_.tasks->last();
    metrics_->write(rec);
    const double eta =
        train_s_ / double(step_ + 1 - sum_.resumed_step) * double(p_.total_steps - step_ - 1);
    char val[32] = "";
    if (eval) std::snprintf(val, sizeof(val), " | val %.4f", last_eval_.loss);
    char line[256];
    std::snprintf(line, sizeof(line),
                  "step %lld/%lld | loss %.4f%s | %.0f tok/s | MFU %.1f%% | lr %.2e | gnorm %.2f | "
                  "ETA %s",
                  (long long)(step_ + 1), (long long)p_.total_steps, o.loss, val,
                  step_tokens / o.dt, 100.0 * rec["mfu"].get<double>(), o.lr, o.grad_norm,
                  format_duration(eta).c_str());
    const std::string text = line + (tasks ? p_.tasks->log_text() : std::string());
    if (tty_ && !tasks)
      std::fprintf(stderr, "\r\033[K%s", text.c_str());
    else if ((step_ + 1) % tc_.log_every == 0 || last || eval || tasks)
      std::fprintf(stderr, "%s%s\n", erase_line(), text.c_str());
  }
  heartbeat_.beat_step(step_ + 1, o.loss, o.grad_norm, o.own_s, b.g_begin, g_);
}

void TrainingRun::announce_checkpoint() {
  if (!lead_ || checkpoints_->last_saved() == announced_) return;
  announced_ = checkpoints_->last_saved();
  std::fprintf(stderr, "%scheckpoint saved: %s\n", erase_line(), announced_.c_str());
}

// Commits the saves every rank has written; starts this step's save when one is due (a stop by
// signal always saves, even in a run configured without checkpoints). It writes in the
// background.
void TrainingRun::checkpoint(bool last, bool stop) {
  checkpoints_->poll();
  announce_checkpoint();
  if ((tc_.checkpoint_every > 0 && ((step_ + 1) % tc_.checkpoint_every == 0 || last)) || stop) {
    TrainerState st;
    st.step = step_ + 1;
    st.tokens_done = tokens_done_;
    st.sample_index = g_;
    st.seed = tc_.seed;
    st.config = p_.root;
    update_->pull_weights();  // the host copies the checkpoint is written from
    checkpoints_->save(model_.params(), update_->optimizer(), *balancer_, st);
  }
}

void TrainingRun::run(Clock::time_point t_start) {
  stop_signals_ = std::make_unique<StopSignals>();
  threads_ = std::make_unique<ThreadGovernor>(opt_.adaptive_threads, omp_get_max_threads());
  if (lead_ || opt_.on_record)
    accounting_ = std::make_unique<StepAccounting>(p_.model, p_.device, opt_.peak_tflops);
  if (lead_)
    std::fprintf(stderr, "MFU against %.3g TFLOP/s (%s)\n", accounting_->peak().flops_per_s / 1e12,
                 accounting_->peak().source.c_str());
  print_header();
  const int n_moe = int(p_.model.num_moe_stages()), n_routes = int(p_.model.num_routes());
  const int64_t first_step = step_;
  for (last_record_ = Clock::now(); step_ < p_.total_steps; ++step_) {
    const auto t0 = Clock::now();
    const int step_threads = omp_get_max_threads();
    faults_.at_step_start(step_ + 1);  // Aegis drills: kill, hang, slow
    if (trace_) trace_->at_step(step_ + 1);
    const StepBatch b = sample();
    model_.set_rope_theta(b.ph->rope_theta);
    model_.placement().zero_grads();
    // Aegis drill "NaN loss and gradients": the gradients overwritten after the backward.
    const bool nan_drill = faults_.loss_fault(step_ + 1);
    std::vector<int64_t> route_counts(size_t(n_moe) * size_t(n_routes), 0);
    StepTimes times;
    double loss_sum = forward_backward(b, route_counts, nan_drill, times);
    if (nan_drill) {  // Aegis drill: NaN loss and gradients (update skipped)
      loss_sum = std::numeric_limits<double>::quiet_NaN();
      update_->fill_gradients(std::nanf(""));
    }
    // This rank's own work, before it waits for the others (stragglers show up in heartbeats).
    const double own_s = seconds_since(t0);
    times.checkpoint_s = last_checkpoint_s_;
    StepOutcome o = update(b, loss_sum, route_counts, times);
    o.own_s = own_s;
    o.stop = agree_on_stop(o.times);
    if (o.stop && sum_.stop_signal.empty()) {
      sum_.stop_signal = stop_signals_->name();
      if (lead_)
        std::fprintf(stderr, "%sstopping after step %lld (%s): saving a checkpoint\n", erase_line(),
                     (long long)(step_ + 1), sum_.stop_signal.c_str());
    }
    const bool last = step_ + 1 == p_.total_steps || o.stop;
    // A stop by signal skips the end-of-run evaluation: the time left goes to the checkpoint.
    const bool eval = (step_ + 1) % tc_.eval_every == 0 || (last && !o.stop);
    const bool tasks = p_.tasks && !o.stop && p_.tasks->due(step_ + 1, last);
    o.dt = seconds_since(t0);
    train_s_ += o.dt;
    if (eval || tasks) {
      try {
        PartClock clock;
        if (eval)
          last_eval_ = evaluate(model_, *p_.loader, b.S, tc_.eval_windows, tc_.micro_batch,
                                tc_.context_parallel > 1 ? p_.grid.data_comm.get() : &comm_);
        clock.mark(o.times.eval_s, "eval");
        if (tasks) p_.tasks->evaluate(model_, &comm_);  // reads the weights, nothing else
        clock.mark(o.times.tasks_s, "tasks");
      } catch (const Error& e) {
        if (!last) throw;  // the last step's evaluation may not cost the run its final save
        if (lead_) std::fprintf(stderr, "warning: the final evaluation failed: %s\n", e.what());
      }
    }
    sum_.final_loss = o.loss;
    o.times.wall_s = seconds_since(last_record_);
    last_record_ = Clock::now();
    log(b, o, step_threads, eval, tasks, last);
    const PartClock save_clock;
    checkpoint(last, o.stop);
    last_checkpoint_s_ = save_clock.elapsed("checkpoint");
    if (o.stop) {
      sum_.interrupted = true;
      ++step_;
      break;
    }
  }
  if (tty_) std::fprintf(stderr, "\n");
  finish(first_step, t_start);
}

// The final save on disk, the model and the run's outputs written, every rank's memory figures
// gathered.
void TrainingRun::finish(int64_t first_step, Clock::time_point t_start) {
  if (step_ == first_step && lead_ && std::filesystem::exists(p_.metrics_path)) {
    // Resumed from the final checkpoint of a run that died before its outputs: no step ran here,
    // so the losses come from the metrics the run wrote.
    for (const json& r : read_metrics(p_.metrics_path)) {
      sum_.final_loss = r.value("loss", sum_.final_loss);
      if (r.contains("val_loss")) last_eval_.loss = r["val_loss"].get<double>();
      if (r.contains("tasks")) sum_.tasks = r["tasks"];
    }
  }
  if (p_.tasks && !p_.tasks->last().is_null()) sum_.tasks = p_.tasks->last();
  heartbeat_.beat_phase(BeatPhase::kCheckpoint, step_, g_);
  checkpoints_->wait();  // the final save must be on disk before the run reports success
  announce_checkpoint();
  sum_.last_checkpoint = checkpoints_->last_saved();
  sum_.steps = step_;
  sum_.train_s = train_s_;
  if (accounting_) {
    sum_.peak_tflops = accounting_->peak().flops_per_s / 1e12;
    sum_.peak_source = accounting_->peak().source;
    sum_.mfu = accounting_->mfu_over(train_s_);
  }
  sum_.tokens = tokens_done_;
  sum_.final_val_loss = last_eval_.loss;
  sum_.unigram_val_loss = last_eval_.unigram;
  model_.set_context_group(nullptr);  // the end-of-run samples decode whole sequences on rank 0
  update_->pull_weights();            // the saved model and the samples read the host copy
  update_->gather_master_weights_to_host();  // bf16 storage: the other ranks' master ranges
  if (lead_)
    write_run_outputs(sum_, model_, tc_, p_.sample_tokenizer.get(), p_.loader->eos_id(),
                      p_.config_path);
  const ParameterPlacement& placement = model_.placement();
  sum_.activation_bytes = int64_t(model_.arena_high_water());
  sum_.device_weight_bytes = int64_t(placement.weight_bytes() + update_->master_bytes());
  sum_.device_grad_bytes = int64_t(placement.grad_bytes());
  sum_.device_plan_bytes = p_.device_plan_bytes;
  gather_memory_summary(sum_, comm_, p_.device);
  comm_.barrier();  // the run's files are complete when any rank returns
  sum_.elapsed_s = seconds_since(t_start);
  if (lead_) write_run_summary(sum_);
  if (trace_) trace_->write();
  heartbeat_.beat_phase(BeatPhase::kDone, step_, g_);
}

}  // namespace

TrainSummary run_training(const TrainOptions& opt) {
  const auto t_start = Clock::now();
  RunWorld world = open_run_world(opt);  // watched and traced (train/run_world.h)
  std::unique_ptr<dist::Communicator>& comm = world.comm;
  RunPlan plan = plan_run(opt, *comm);
  TrainSummary sum;
  sum.out_dir = plan.train.out_dir;
  sum.device = plan.device.description;
  if (plan.finished_at >= 0) {
    if (comm->rank() == 0)
      std::fprintf(stderr,
                   "%s: this run already finished at step %lld (summary.json); nothing to do, "
                   "nothing changed\n",
                   sum.out_dir.c_str(), (long long)plan.finished_at);
    sum.already_finished = true;
    sum.steps = plan.finished_at;
    // A supervisor that restarted a job which had in fact finished sees it end at that step.
    HeartbeatWriter(sum.out_dir, comm->rank()).beat_phase(BeatPhase::kDone, plan.finished_at, 0);
    return sum;
  }
  sum.metrics_path = plan.metrics_path;
  sum.plot_path = plan.plot_path;
  sum.model_dir = plan.model_dir;
  TrainingRun run(plan, opt, world, sum);
  run.build();
  run.run(t_start);
  return sum;
}

}  // namespace zaya
