// `zaya bench step`: forward+backward throughput of the model on random tokens, and with
// --optimizer the optimizer's step too. The parameters stay in the backend's memory (as in
// `zaya train`), and each timed step ends with the backend's queue drained.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/precision.h"
#include "model/config.h"
#include "model/recompute.h"

namespace zaya {

struct StepBenchOptions {
  int batch = 4;
  int seq = 256;
  int steps = 5;
  int warmup = 1;
  uint64_t seed = 1234;
  std::string save_model_dir;   // if set, the benchmarked (random-init) model is written here
  std::string device = "auto";  // backend/device_select.h
  Precision precision = Precision::kAuto;  // bf16 on cuda (or cpu-as-device's stand-in)
  bool optimizer = false;  // time Optimizer::step (AdamW + Muon, default settings) too
  // The LM head and loss in blocks of tokens × vocab logits (0 × 0: the logits materialised).
  int lm_head_chunk_tokens = 0, lm_head_chunk_vocab = 0;
  // The recompute modes to time (model/recompute.h), each step of the loop running every one of
  // them in turn on the same weights, so that a machine's drift touches them alike.
  std::vector<Recompute> recompute{Recompute::kNone};
  // Time each step twice in turn: without, then with what `zaya train --metrics-port` adds to a
  // step (train/step_accounting.h's parts, routers and memory, and the record, handed to
  // on_record: the command's Prometheus gauges and one scrape per step); one recompute mode.
  bool accounting = false;
  using RecordSink = std::function<void(const nlohmann::json&)>;
  RecordSink on_record;
};

// One recompute mode's figures.
struct RecomputeRun {
  Recompute mode = Recompute::kNone;
  bool accounting = false;  // with the step accounting and /metrics (StepBenchOptions::accounting)
  double step_ms = 0, tokens_per_s = 0;
  size_t activation_bytes = 0;  // both arenas' most in one step (ZayaModel::step_activation_bytes)
  float loss = 0;               // the last step's
};

struct StepBenchResult {
  double tokens_per_s = 0;
  double step_ms = 0;       // forward + backward (+ the optimizer with --optimizer)
  double optimizer_ms = 0;  // the optimizer's part of step_ms
  float loss = 0;
  size_t arena_bytes = 0;
  std::string device;       // what it ran on (ComputeDevice::description)
  bool host_memory = true;  // the device computes on the host's memory (the CPU backend)
  // Copies to the host per timed step (each a GPU synchronisation; backend/backend.h) and their
  // bytes; 0 on the host's own memory.
  double host_reads_per_step = 0, host_read_bytes_per_step = 0;
  // Training FLOPs per token (model/model_info.h, at this sequence length), for MFU figures.
  double train_flops_per_token = 0;
  // GPU memory in use after the timed steps (the arena keeps its largest blocks, so this is the
  // step's peak plus the runtime's); 0 off the GPU.
  double device_memory_bytes = 0;
  // Every mode of StepBenchOptions::recompute (with --accounting: off, then on); the fields
  // above are the first one's.
  std::vector<RecomputeRun> recompute_runs;
};

StepBenchResult run_step_bench(const ModelConfig& config, const StepBenchOptions& opt,
                               bool progress);

}  // namespace zaya
