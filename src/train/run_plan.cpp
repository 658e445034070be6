#include "train/run_plan.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "core/error.h"
#include "core/host_memory.h"
#include "dist/communicator.h"
#include "dist/dist_context.h"
#include "model/context_shard.h"
#include "model/hf_config.h"
#include "optim/schedule.h"
#include "tokenizer/tokenizer_files.h"
#include "train/device_memory_check.h"
#include "train/metrics.h"
#include "train/run_dir.h"
#include "train/train_memory.h"

namespace zaya {

namespace fs = std::filesystem;
using nlohmann::json;

int64_t phase_batch(const DataPhase& phase, const TrainConfig& tc) {
  return phase.global_batch > 0 ? phase.global_batch : tc.global_batch;
}

namespace {

// The schedule's length follows from the phases' token budgets and the batch-size ramp.
int64_t schedule_length(const RunPlan& p) {
  int64_t steps = 0, tokens = 0;
  while (tokens < p.data.total_tokens()) {
    const auto& phase = p.data.phases[size_t(p.loader->phase_at(tokens))];
    tokens +=
        batch_sequences(p.optim, steps, phase_batch(phase, p.train), p.granule) * phase.seq_len;
    ++steps;
  }
  return steps;
}

// The config's sections, with the command line's overrides.
void read_config(RunPlan& p, const TrainOptions& opt) {
  const std::string& path = p.config_path;
  p.root = read_config_file(path);
  ZAYA_CHECK(p.root.contains("model"), path, ": missing required section 'model'");
  p.model = model_config_from_json(p.root["model"], path);
  ZAYA_CHECK(p.root.contains("train"), path, ": missing section 'train' (zaya train needs it)");
  ZAYA_CHECK(p.root.contains("data"), path, ": missing section 'data' (zaya train needs it)");
  p.train = train_config_from_json(p.root["train"], path);
  if (!opt.out_dir.empty()) p.train.out_dir = opt.out_dir;
  if (opt.max_steps >= 0) p.train.max_steps = opt.max_steps;
  if (opt.context_parallel >= 1) p.train.context_parallel = opt.context_parallel;
}

// The batch against the ranks: each data rank takes an equal, whole number of micro-batches of
// every step's batch (the context ranks of one data rank share its sequences).
void check_batches(RunPlan& p) {
  const std::string& path = p.config_path;
  const TrainConfig& tc = p.train;
  const int data_world = p.grid.data, cp = tc.context_parallel;
  p.granule = int64_t(tc.micro_batch) * data_world;
  ZAYA_CHECK(tc.global_batch % p.granule == 0, path, ": 'train.global_batch' (", tc.global_batch,
             ") must be a multiple of 'train.micro_batch' (", tc.micro_batch, ") x ", data_world,
             cp > 1 ? " data-parallel ranks = " : " ranks = ", p.granule,
             ", so that every rank takes whole micro-batches");
  for (const DataPhase& ph : p.data.phases)
    ZAYA_CHECK(ph.global_batch % p.granule == 0, path, ": data phase '", ph.name,
               "': 'global_batch' (", ph.global_batch, ") must be a multiple of ", p.granule,
               " ('train.micro_batch' x data-parallel ranks)");
  // A ramp that starts above the batch would be clamped to it: no ramp at all, without a word.
  if (p.optim.batch_ramp && p.optim.batch_ramp->ramp_steps > 0)
    for (const DataPhase& ph : p.data.phases)
      ZAYA_CHECK(
          p.optim.batch_ramp->start_sequences <= phase_batch(ph, tc), path,
          ": 'train.optim.batch_ramp.start_sequences' (", p.optim.batch_ramp->start_sequences,
          ") is larger than the global batch (", phase_batch(ph, tc), ") of data phase '", ph.name,
          "'; a ramp grows the batch up to the global batch, so it must start at or below it");
}

// A validation window for every phase's length, and sequences long enough for the context
// parallelism: a bad config fails in seconds rather than after the schedule.
void check_phases(const RunPlan& p) {
  const std::string& path = p.config_path;
  const int cp = p.train.context_parallel;
  for (const DataPhase& ph : p.data.phases) {
    int64_t windows = 0;
    for (int src = 0; src < p.loader->num_sources(); ++src)
      windows += p.loader->val_windows(src, int(ph.seq_len));
    ZAYA_CHECK(windows > 0, path, ": data phase '", ph.name, "' (seq_len ", ph.seq_len,
               "): no source's validation split has a window of ", ph.seq_len + 1,
               " tokens; prepare the data with a larger --val-fraction or use a shorter seq_len");
    ZAYA_CHECK(ph.seq_len >= ContextShard::min_seq_len(cp), path, ": data phase '", ph.name,
               "' (seq_len ", ph.seq_len, ") is too short for context parallel ", cp,
               ": its sequences are cut into ", 2 * cp, " chunks of at least ",
               ContextShard::kMinChunk,
               " tokens, so seq_len must be >= ", ContextShard::min_seq_len(cp));
  }
}

// A micro-batch whose step cannot fit in this machine's memory is refused here, not by the
// kernel's OOM killer at step 1: the rank's weights, gradients, optimizer state and one
// micro-batch's activations at every phase's sequence length (train/train_memory.h, fp32 as the
// CPU backend keeps them), against the host's memory shared by the ranks on it. Device backends
// are left to their own allocation errors so far (issue 41's plan).
void check_memory(const RunPlan& p, int world) {
  if (!p.device.backend->host_memory()) return;
  const int64_t memory = host_memory_bytes() / dist::local_ranks();
  const int cp = p.train.context_parallel;
  MemoryOptions bytes;
  bytes.recompute = p.train.recompute;
  bytes.zero_stage = p.train.zero_stage;
  auto need = [&](int64_t micro_batch, int64_t seq) {
    return train_memory(p.model, micro_batch, seq / cp, world, 0, bytes);
  };
  for (const DataPhase& ph : p.data.phases) {
    const TrainMemory m = need(p.train.micro_batch, ph.seq_len);
    if (m.total() <= memory) continue;
    int64_t fits = 0;  // the largest micro-batch that fits: the memory grows with it
    for (int64_t step = int64_t(1) << 30; step > 0; step /= 2)
      if (fits + step < p.train.micro_batch && need(fits + step, ph.seq_len).total() <= memory)
        fits += step;
    ZAYA_FAIL(p.config_path, ": 'train.micro_batch' ", p.train.micro_batch, " at data phase '",
              ph.name, "' (seq_len ", ph.seq_len, ") needs at least ",
              format_bytes(double(m.total())), " per rank (activations ",
              format_bytes(double(m.activations)), ", weights, gradients and optimizer state ",
              format_bytes(double(m.weights + m.gradients + m.optimizer + m.muon + m.zero1)),
              "), more than this machine's ", format_bytes(double(memory)),
              dist::local_ranks() > 1 ? " (its memory over the ranks on it)" : "", "; ",
              fits > 0 ? "'train.micro_batch' " + std::to_string(fits) + " fits"
                       : std::string("not even 'train.micro_batch' 1 fits"),
              " (zaya info --config shows the plan)");
  }
}

// A device backend's memory against the run's plan (train/device_memory_check.h): --device-memory,
// or the device's own figure (with what is in use already, its context, as the runtime);
// nothing to check where neither is known (cpu-as-device without the flag), but the plan is kept
// for the summary.
void check_device_memory(RunPlan& p, const TrainOptions& opt, int world) {
  const DeviceMemory now = p.device.memory();
  DeviceMemoryRun run;
  run.memory = opt.device_memory > 0 ? opt.device_memory : int64_t(now.total);
  run.memory_from = opt.device_memory > 0 ? "--device-memory" : "device " + p.device.name;
  run.runtime = int64_t(now.used);
  run.config_path = p.config_path;
  run.model = p.model;
  run.micro_batch = p.train.micro_batch;
  for (const DataPhase& ph : p.data.phases) run.phases.emplace_back(ph.name, ph.seq_len);
  run.world = world;
  run.context_parallel = p.train.context_parallel;
  // As the trainer keeps them (ParameterPlacement::set_bf16_weight_storage).
  const bool bf16 = opt.weight_storage == StoredAs::kBf16 && p.device.backend->bf16_weights();
  run.options.weights = bf16 ? 2 : 4;
  run.options.gradients = bf16 && opt.gradient_storage == StoredAs::kBf16 ? 2 : 4;
  run.options.activations = opt.activation_storage == StoredAs::kBf16 ? 2 : 4;
  run.options.recompute = p.train.recompute;
  run.options.zero_stage = p.train.zero_stage;
  run.options.lm_head_chunks = {p.train.lm_head_chunk_tokens, p.train.lm_head_chunk_vocab};
  run.options.device = true;
  for (const DataPhase& ph : p.data.phases) {
    const int64_t seq = ph.seq_len / run.context_parallel, tokens = run.micro_batch * seq;
    const ActivationArenas a = activation_arenas(
        p.model, run.micro_batch, seq, every_token_routed(p.model, tokens), run.options.recompute,
        true, run.options.lm_head_chunks,
        run.options.activations == 2 ? ActivationStorage::kBf16 : ActivationStorage::kFp32);
    p.activations.step = std::max(p.activations.step, a.step);
    p.activations.transient = std::max(p.activations.transient, a.transient);
  }
  const DevicePlan plan = check_device_memory(run);
  p.device_plan_bytes = plan.bytes - run.runtime;  // what zaya allocates itself
  if (!plan.line.empty()) p.device_memory_line = plan.line + "\n";
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

// --resume auto: the newest checkpoint that verifies, or none (step 0).
std::string find_resume_checkpoint(const RunPlan& p, dist::Communicator& comm, bool lead) {
  // Collective: the ranks share the checksums of the files (each file is read by one rank).
  std::vector<std::string> damaged;
  const std::string dir = find_latest_checkpoint(
      p.ckpt_root,
      [&](const std::string& msg) {
        if (lead) std::fprintf(stderr, "%s\n", msg.c_str());
      },
      &comm, &damaged);
  // Resuming from an older step: the skipped ones move aside, out of reach of the saves of their
  // steps and of retention, and stay for inspection.
  if (!dir.empty()) {
    for (const std::string& d : damaged) {
      if (!lead) continue;
      const std::string aside = set_aside_damaged_checkpoint(d);
      std::fprintf(stderr,
                   "resume: damaged checkpoint %s moved aside to %s for inspection (later saves "
                   "and retention never touch it)\n",
                   d.c_str(), aside.c_str());
    }
    comm.barrier();
  }
  // Damaged checkpoints are evidence, not garbage: starting over would let retention delete
  // them. Step 0 only when no checkpoint was ever committed here.
  ZAYA_CHECK(!dir.empty() || !has_committed_checkpoints(p.ckpt_root),
             "--resume auto: every checkpoint under ", p.ckpt_root,
             " is damaged (see above); nothing was deleted. Resume from one of them with "
             "--resume DIR after repairing it, or move them away to start over from step 0");
  if (dir.empty() && lead)
    std::fprintf(stderr, "resume auto: no complete checkpoint under %s, starting from step 0\n",
                 p.ckpt_root.c_str());
  return dir;
}

// The samples of the end of the run, tried now: the tokenizer must be the data's (or the model
// learns one vocabulary and the samples are read in another) and every prompt must encode.
// 'train.tokenizer' must be the one the data was encoded with; USE says what would read it wrong.
void check_data_tokenizer(const RunPlan& p, const Tokenizer& tok, const std::string& use) {
  ZAYA_CHECK(tok.vocab_size() == p.loader->vocab_size(), p.config_path, ": 'train.tokenizer' ",
             p.train.tokenizer, " has ", tok.vocab_size(),
             " tokens but the data was prepared with a tokenizer of ", p.loader->vocab_size(),
             " (the sources' index.json); ", use,
             ": name the data's tokenizer, or prepare the data with this one");
}

void check_samples(const RunPlan& p) {
  const std::string& path = p.config_path;
  const Tokenizer& tok = *p.sample_tokenizer;
  check_data_tokenizer(p, tok,
                       "the samples would be decoded by another tokenizer than the one the data "
                       "was encoded with");
  for (size_t i = 0; i < p.train.sample_prompts.size(); ++i)
    ZAYA_CHECK(!tok.encode(p.train.sample_prompts[i]).empty(), path, ": 'train.sample_prompts'[", i,
               "] encodes to no tokens; a sample continues a prompt of at least one token");
}

// Everything the end of the run does that can fail is tried before step 1, so that a run of days
// never ends in an error it could have named at the start: the exported model's config
// (OUT/model/config.json), the files the end writes, and the samples (the final evaluation's
// windows are check_phases'). The plot only ever costs a warning.
void check_run_end(const RunPlan& p, bool lead) {
  const std::string& path = p.config_path;
  (void)hf_config_from_model(p.model, "float32");  // throws naming the field it cannot write
  const fs::path out = p.train.out_dir;
  std::error_code ec;
  ZAYA_CHECK(!fs::exists(out, ec) || fs::is_directory(out, ec), path,
             ": the run directory ('train.out_dir' or --out) '", out.string(),
             "' is a file; it must be a directory (or not exist yet)");
  ZAYA_CHECK(!fs::exists(out / "model", ec) || fs::is_directory(out / "model", ec), "'",
             (out / "model").string(), "' is a file; the end of the run writes the model there");
  for (const char* name : {"metrics.jsonl", "summary.json", "samples.txt", "loss.svg"})
    ZAYA_CHECK(!fs::is_directory(out / name, ec), "'", (out / name).string(),
               "' is a directory; the run writes its file ", name, " there");
  if (lead && p.sample_tokenizer) check_samples(p);
}

// The run's config against the checkpoint it continues (p.resumed).
void check_against_checkpoint(const RunPlan& p, const TrainOptions& opt, bool lead) {
  const std::string& dir = p.resume_dir;
  ZAYA_CHECK(p.resumed.state.seed == p.train.seed, "checkpoint ", dir, ": saved with seed ",
             p.resumed.state.seed, " but 'train.seed' is ", p.train.seed,
             "; the data order would differ, so the run could not continue exactly");
  check_resume_config(p.resumed.state.config, p.root, dir, opt.allow_changes,
                      [&](const std::string& msg) {
                        if (lead) std::fprintf(stderr, "%s\n", msg.c_str());
                      });
}

// Resume: every rank reads the checkpoint (of any world size) and keeps its own range of the
// optimizer state. The checkpoint is read before the metrics file is opened, so the metrics of
// steps past the checkpoint (from the interrupted run) can be dropped and the rest continued.
void resolve_resume(RunPlan& p, const TrainOptions& opt, dist::Communicator& comm, bool lead) {
  p.resume_dir = opt.resume.kind == ResumeFrom::Kind::kLatest
                     ? find_resume_checkpoint(p, comm, lead)
                     : opt.resume.checkpoint;
  if (p.resume_dir.empty()) return;
  const std::string& dir = p.resume_dir;
  // Verified once: --resume auto's choice was just verified, a named one is verified here (the
  // checksums shared by the ranks); then only the manifest is read again.
  const bool verified = opt.resume.kind == ResumeFrom::Kind::kLatest;
  p.resumed = checkpoint_header(dir, verify_checkpoint(dir, &comm, !verified));
  ZAYA_CHECK(p.resumed.state.step <= p.total_steps, "checkpoint ", dir, " is at step ",
             p.resumed.state.step, ", past this run's last step ", p.total_steps);
  check_against_checkpoint(p, opt, lead);
  if (lead) truncate_metrics(p.metrics_path, p.resumed.state.step);
}

// The "eval" section's benchmark tasks (train/train_tasks.h): every file read and tokenized with
// 'train.tokenizer' on every rank (each scores its share of the items), so a bad file refuses the
// run here, naming the file and the line.
void plan_eval_tasks(RunPlan& p) {
  const std::string& path = p.config_path;
  if (!p.root.contains("eval")) return;
  const TrainTasksConfig config = train_tasks_config_from_json(p.root["eval"], path);
  ZAYA_CHECK(!p.train.tokenizer.empty(), path,
             ": 'eval.tasks' needs 'train.tokenizer' (the data's tokenizer.json) to tokenize the "
             "task files");
  ZAYA_CHECK(p.train.context_parallel == 1 && p.device.backend->host_memory(), path,
             ": 'eval.tasks' runs on the CPU backend without context parallelism so far (--device ",
             p.device.name, ", context parallel ", p.train.context_parallel, ")");
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(p.train.tokenizer);
  ZAYA_CHECK(tokenizer->vocab_size() <= p.model.vocab_size, path, ": 'train.tokenizer' ",
             p.train.tokenizer, " has ", tokenizer->vocab_size(),
             " tokens but 'model.vocab_size' is ", p.model.vocab_size);
  check_data_tokenizer(p, *tokenizer,
                       "'eval.tasks' would be tokenized by another tokenizer than the one the "
                       "data was encoded with");
  p.tasks = std::make_unique<TrainTasks>(config, path, *tokenizer, p.train.eval_every);
  p.tasks->check_fits(p.model, host_memory_bytes(), path);
}

// A finished run resumed with --resume auto: nothing to do, unless the config changed in a way a
// resume refuses (a changed global batch, say), which is named rather than "nothing changed".
void check_finished_run(RunPlan& p, const TrainOptions& opt, dist::Communicator& comm, bool lead) {
  const std::string dir = find_latest_checkpoint(
      p.ckpt_root, [](const std::string&) {}, &comm);
  if (dir.empty()) return;
  p.resumed = checkpoint_header(dir, verify_checkpoint(dir, &comm, false));
  p.resume_dir = dir;
  check_against_checkpoint(p, opt, lead);
  p.resume_dir.clear();
}

}  // namespace

RunPlan plan_run(const TrainOptions& opt, dist::Communicator& comm) {
  const bool lead = comm.rank() == 0;  // the rank that prints and writes run files
  RunPlan p;
  p.config_path = opt.config_path;
  const std::string& path = p.config_path;
  read_config(p, opt);
  p.grid = dist::make_rank_grid(comm, p.train.context_parallel, path,
                                "train.context_parallel or --context-parallel");
  p.optim = optim_config_from_json(p.train.optim, path);
  p.data = data_config_from_json(p.root["data"], path);
  p.loader = std::make_unique<DataLoader>(p.data, p.train.seed);
  ZAYA_CHECK(p.loader->vocab_size() <= p.model.vocab_size, path, ": the data's tokenizer has ",
             p.loader->vocab_size(), " tokens but 'model.vocab_size' is ", p.model.vocab_size);
  check_batches(p);
  // max_steps stops a run early without reshaping the schedule.
  p.schedule_steps = schedule_length(p);
  ZAYA_CHECK(p.schedule_steps > 0, path, ": the data phases hold no tokens to train on");
  p.total_steps =
      p.train.max_steps > 0 ? std::min(p.train.max_steps, p.schedule_steps) : p.schedule_steps;
  check_phases(p);
  // The device (backend/device_select.h): a bad name, a missing plugin or no GPU fails here.
  p.device = open_device(opt.device, opt.precision);
  p.device.check_world(comm.world_size());
  const int cp = p.train.context_parallel;
  ZAYA_CHECK(cp == 1 || p.device.backend->host_memory(), "--device ", p.device.name,
             ": context parallelism (train.context_parallel ", cp,
             ") runs on the CPU backend only so far; use --device cpu");
  // Loaded here, by the rank that samples, and kept for the samples at the end.
  if (lead && p.train.sample_tokens > 0 && !p.train.tokenizer.empty()) {
    p.sample_tokenizer = load_tokenizer(p.train.tokenizer);
    ZAYA_CHECK(p.sample_tokenizer->vocab_size() <= p.model.vocab_size, path, ": 'train.tokenizer' ",
               p.train.tokenizer, " has ", p.sample_tokenizer->vocab_size(),
               " tokens but 'model.vocab_size' is ", p.model.vocab_size);
  }
  // ZeRO-2 keeps the gradients in memory the backend takes and gives back in granules.
  ZAYA_CHECK(p.train.zero_stage == 1 || p.device.backend->memory_granule() > 0, p.config_path,
             ": 'train.zero_stage' 2 on the ", p.device.backend->name(),
             " backend: it cannot give gradient memory back while a step runs (a GPU without "
             "virtual memory management, or the HIP build, where it is not built yet); use "
             "'train.zero_stage' 1");
  ZAYA_CHECK(opt.activation_storage == StoredAs::kFp32 || !p.device.backend->host_memory(),
             "--activation-storage bf16 is for a device's memory (cuda, or cpu-as-device standing "
             "in for one); the ",
             p.device.backend->name(),
             " backend keeps its activations in fp32 (the oracle the devices are held to)");
  check_memory(p, comm.world_size());
  if (!p.device.backend->host_memory()) check_device_memory(p, opt, comm.world_size());
  plan_eval_tasks(p);

  check_run_end(p, lead);
  const std::string& out = p.train.out_dir;
  p.ckpt_root = (fs::path(out) / "ckpt").string();
  if (opt.resume.kind == ResumeFrom::Kind::kNone) refuse_existing_run(out);  // every rank first
  if (opt.resume.kind == ResumeFrom::Kind::kLatest) {
    const auto finished = finished_run_steps(out);
    if (finished && *finished >= p.total_steps) {
      check_finished_run(p, opt, comm, lead);
      p.finished_at = *finished;
      return p;
    }
  }
  if (lead) fs::create_directories(out);
  p.metrics_path = (fs::path(out) / "metrics.jsonl").string();
  p.plot_path = (fs::path(out) / "loss.svg").string();
  p.model_dir = (fs::path(out) / "model").string();
  resolve_resume(p, opt, comm, lead);
  comm.barrier();  // the run directory exists and the metrics are truncated
  return p;
}

}  // namespace zaya
