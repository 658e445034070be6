// What `zaya train` decides before step 1: the config read and cross-checked (every number
// against the type that holds it, the batch against the ranks, a validation window for every
// phase), the schedule's length, the rank grid, the device opened, the samples' tokenizer loaded,
// and the resume resolved (the checkpoint found and verified, its config held against the run's,
// the metrics of steps past it dropped). Everything that can refuse a run refuses it here, in
// seconds and before anything of the run is written.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "backend/device_select.h"
#include "ckpt/checkpoint.h"
#include "data/data_config.h"
#include "data/loader.h"
#include "dist/rank_grid.h"
#include "model/config.h"
#include "optim/optim_config.h"
#include "tokenizer/tokenizer.h"
#include "train/train_config.h"
#include "train/train_memory.h"
#include "train/train_tasks.h"
#include "train/trainer.h"

namespace zaya {

struct RunPlan {
  std::string config_path;
  nlohmann::json root;  // the whole config file (saved in every checkpoint)
  ModelConfig model;
  TrainConfig train;  // with the command line's overrides
  OptimConfig optim;
  DataConfig data;
  std::unique_ptr<DataLoader> loader;
  dist::RankGrid grid;         // world = data × context (dist/rank_grid.h)
  int64_t granule = 0;         // sequences per micro-batch over every data rank
  int64_t schedule_steps = 0;  // the LR schedule's length (the phases' tokens)
  int64_t total_steps = 0;     // this run's steps (max_steps may stop it earlier)
  ComputeDevice device;
  std::unique_ptr<Tokenizer> sample_tokenizer;  // the lead rank's, for the end-of-run samples
  std::unique_ptr<TrainTasks> tasks;  // the config's "eval" section, read and tokenized; or none
  std::string ckpt_root, metrics_path, plot_path, model_dir;
  // The run already finished at this step (--resume auto on a finished run): nothing to do.
  int64_t finished_at = -1;
  // On a device backend whose memory is known: the plan's total against it (check_device_memory),
  // a line ending in a newline; empty otherwise.
  std::string device_memory_line;
  // The plan's total per rank on a device backend, less the runtime (the device's context): what
  // zaya's own allocations are planned to hold at most (DeviceMemory::peak).
  int64_t device_plan_bytes = 0;
  // On a device backend: the arenas' sizes the plan counts (the longest phase, every token to an
  // expert), reserved before step 1 so that no step grows them.
  ActivationArenas activations;
  std::string resume_dir;    // the checkpoint to resume from; empty for a fresh run
  LoadedCheckpoint resumed;  // its header (the state is read into the model and optimizer later)
};

// Collective (the ranks share the checkpoints' checksums). Throws zaya::Error naming the file,
// field or flag when the run cannot go ahead. Writes nothing but the run directory itself and,
// on a resume, the metrics file cut back to the checkpoint's step.
RunPlan plan_run(const TrainOptions& opt, dist::Communicator& comm);

// Sequences per step of a phase: its own global_batch, or the run's.
int64_t phase_batch(const DataPhase& phase, const TrainConfig& tc);

}  // namespace zaya
