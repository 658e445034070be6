// `zaya train`: the step loop. Each optimizer step draws global_batch sequences (the batch-size
// ramp may draw fewer early on) as micro-batches of global sample indices g, g+1, ... from the
// data loader (whose order is a pure function of seed and g), accumulates gradients, clips, steps
// AdamW + Muon, then updates the routers' balancing biases from the step's expert loads.
// Checkpoints go to OUT/ckpt (see ckpt/checkpoint.h); a resumed run continues bitwise as if
// uninterrupted. Metrics go to OUT/metrics.jsonl, the final model to OUT/model, the loss plot to
// OUT/loss.svg (and the tasks' accuracy to OUT/tasks.svg).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/precision.h"
#include "dist/collective_watchdog.h"
#include "train/run_trace.h"
#include "train/train_modes.h"

namespace zaya {

struct TrainOptions {
  std::string config_path;
  std::string out_dir;       // overrides train.out_dir when set
  int64_t max_steps = -1;    // overrides train.max_steps when ≥ 0
  int context_parallel = 0;  // overrides train.context_parallel when ≥ 1
  bool progress = true;      // live progress line on stderr
  // kLatest: the newest checkpoint under OUT/ckpt that verifies (none: start from scratch).
  ResumeFrom resume;
  // Start from these weights instead of the seeded init (an HF model directory, a zaya checkpoint
  // or a run's ckpt/ root; see ckpt/hf_interop.h): continued pretraining with a fresh optimizer,
  // schedule and data order. The model config must match the run's. Ignored when resuming.
  std::string init_from;
  // Resume even when the optimizer settings or the micro-batch differ from the checkpoint's
  // config (see train/run_dir.h for what a resume may change).
  bool allow_changes = false;
  // Lower the thread count while other work holds the CPU and raise it again when it is free
  // (train/thread_governor.h). Never changes the results.
  bool adaptive_threads = true;
  // The backend the model computes on (backend/device_select.h): cpu, cuda, auto or
  // cpu-as-device. The optimizer, ZeRO-1 and checkpoints stay on the host either way, so a
  // checkpoint does not depend on the device that wrote it.
  std::string device = "auto";
  Precision precision = Precision::kAuto;  // kBf16 on cuda (or cpu-as-device's stand-in)
  // Where the products take bf16 weights: kBf16 keeps the weights in bf16 alone, with the fp32
  // master weights of the rank's ZeRO-1 range (ParameterPlacement::set_bf16_weight_storage); kFp32
  // keeps full fp32 weights on every rank and rounds a bf16 copy each forward. The same bits.
  StoredAs weight_storage = StoredAs::kBf16;
  // With bf16 weight storage: kBf16 keeps the Muon matrices' gradients in bf16 too (each
  // product's backward adds into them with one rounding, so accumulation rounds once per
  // micro-batch); kFp32 keeps every gradient in fp32.
  StoredAs gradient_storage = StoredAs::kBf16;
  // On a device backend: kBf16 keeps the bulk of what each forward keeps for the backward in
  // bf16, every op computing in fp32 (model/stored_activations.h); kFp32 keeps it in fp32.
  StoredAs activation_storage = StoredAs::kFp32;
  // --device-memory: the bytes of device memory a rank's plan must fit (0: the device's own
  // figure, where it gives one); checked before step 1 (train/device_memory_check.h).
  int64_t device_memory = 0;
  // The peak MFU is taken against, in TFLOP/s (--peak-tflops: the device's datasheet figure for
  // the run's precision, e.g. 989 for an H100's dense bf16); 0: measured at start on a square
  // product of the run's backend and precision (train/step_accounting.h).
  double peak_tflops = 0;
  // --trace FILE: a Chrome trace of the steps of trace_steps (train/run_trace.h); "" none.
  std::string trace_path;
  TraceWindow trace_steps;
  // How long a rank may wait in one collective before it reports the wait, and how long after
  // that it ends (dist/collective_watchdog.h); a default_s of 0 turns the watch off.
  dist::CollectiveTimeouts collective_timeouts;
  double collective_abort_after_s = 5;
  // Each metrics.jsonl record as it is written, on rank 0 (zaya train --metrics-port serves them).
  std::function<void(const nlohmann::json&)> on_record;
};

struct TrainSummary {
  int64_t steps = 0;
  int64_t tokens = 0;
  double final_loss = 0;
  double final_val_loss = 0;
  double unigram_val_loss = 0;  // entropy of the validation tokens' own unigram distribution
  double elapsed_s = 0;
  double train_s = 0;  // in training steps (no setup, evaluation or checkpoint wait)
  // Rank 0's seconds in the gradient reduce-scatter after its backward ended: with the
  // reduce-scatter overlapping the backward, only what the backward did not hide.
  double grad_reduce_wait_s = 0;
  bool interrupted = false;       // stopped early by a signal (SIGINT, SIGTERM, SIGUSR1)
  std::string stop_signal;        // its name, when interrupted
  bool already_finished = false;  // --resume auto on a finished run: nothing was done
  std::string out_dir, metrics_path, plot_path, model_dir;
  std::string device;  // what the model computed on, e.g. "cuda (NVIDIA H100 80GB HBM3, 79.1 GiB)"
  std::string resumed_from;     // checkpoint directory, empty for a fresh run
  std::string last_checkpoint;  // newest checkpoint this run wrote
  int64_t resumed_step = 0;
  std::vector<std::string> samples;
  std::string tasks_plot_path;  // OUT/tasks.svg when there are tasks
  nlohmann::json tasks;  // the last evaluation of the "eval" section's tasks (train/train_tasks.h)
  double peak_tflops = 0;   // what MFU was taken against (given, or measured at start)
  std::string peak_source;  // which of the two
  double mfu = 0;           // over the run's training steps: tokens / train_s x FLOPs / peak
  // Peak resident memory of each rank's process (getrusage), and the most device memory each
  // rank had in use where the device counts it (0 elsewhere), gathered at the end of the run.
  std::vector<int64_t> peak_rss_bytes, device_peak_bytes;
  // Rank 0's device memory plan (train/device_memory_check.h) less the device's context: what
  // zaya's own allocations were planned to hold at most (0 on the CPU backend).
  int64_t device_plan_bytes = 0;
  // Rank 0's memory of the model on its device: the activations' high water (the step's arena),
  // the weights and the gradients as kept there (0 on the CPU, where they are the host's).
  int64_t activation_bytes = 0, device_weight_bytes = 0, device_grad_bytes = 0;
};

TrainSummary run_training(const TrainOptions& opt);

}  // namespace zaya
