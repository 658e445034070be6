// The "train" section of a zaya config: batch shape, evaluation, logging, samples, and the
// optimizer ("train.optim", parsed by src/optim).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/recompute.h"

namespace zaya {

struct TrainConfig {
  uint64_t seed = 1;
  int micro_batch = 8;    // sequences per forward/backward
  int global_batch = 16;  // sequences per optimizer step (a multiple of micro_batch)
  int64_t max_steps = 0;  // 0 = run until the data phases' token budgets are spent
  int eval_every = 50;    // steps between validation losses (and at the end)
  int eval_windows = 32;  // validation sequences per source per evaluation
  int log_every = 10;     // steps between progress lines when stderr is not a terminal
  std::string out_dir = "runs/default";
  std::string tokenizer;   // tokenizer.json of the data, to encode prompts and decode samples
  int sample_tokens = 64;  // tokens generated per prompt at the end (0 = no samples)
  float sample_temperature = 0.8f;
  int sample_top_k = 40;
  std::vector<std::string> sample_prompts = {"The"};
  // Checkpoints under OUT/ckpt (see ckpt/checkpoint.h): one every checkpoint_every steps and at
  // the end (0 = none); retention keeps the newest keep_last and every keep_every-th step.
  int64_t checkpoint_every = 0;
  int keep_last = 3;
  int64_t keep_every = 0;
  // The LM head and loss in blocks of lm_head_chunk_tokens × lm_head_chunk_vocab logits
  // (backend/cpu/lm_head_loss.h): no [tokens × vocab] buffer. 0 and 0: the logits of a
  // micro-batch are materialised (fine for small vocabularies; ZAYA1's 262,272 wants blocks).
  int lm_head_chunk_tokens = 0;
  int lm_head_chunk_vocab = 0;
  // Context parallelism: each sequence spread over this many ranks (model/context_shard.h), the
  // world a grid of data × context ranks. 1: every rank holds whole sequences.
  int context_parallel = 1;
  // What each stage's forward keeps for the backward (model/recompute.h,
  // ZayaModel::set_recompute): everything; the products' outputs, the cheap rest made again
  // (selective: about half the activations for a few percent more compute); or the stage's input
  // and output, the whole stage made again (full: long sequences, for about a third more).
  // One mode for every stage, or each kind of stage its own ({"attention": ..., "moe": ...}).
  RecomputePlan recompute{};
  // With several ranks, ZeRO-1's reduce-scatter buckets start while the step's last backward
  // still runs, as soon as the stages they cover are done (Zero1Sync::grads_final_from). The
  // gradients are bitwise the same either way; false waits for the whole backward (to measure).
  bool overlap_reduce = true;
  // Floats one ZeRO-1 bucket moves over all ranks (each rank's slice is this / ranks): smaller
  // buckets start sooner in the backward, larger ones pay the per-call latency fewer times.
  int64_t zero1_bucket_floats = int64_t(1) << 21;  // 8 MiB, Zero1Sync::kDefaultStagingFloats
  // How the optimizer's state and the gradients are sharded over the data ranks. 1 (ZeRO-1):
  // the optimizer state; every rank holds the whole gradient until its reduce-scatter. 2
  // (ZeRO-2): the gradients too: each backward's gradients move to their owner rank as the
  // backward finishes them and their memory is given back (optim/zero2_reduce.h, docs/memory.md).
  int zero_stage = 1;
  nlohmann::json optim = nlohmann::json::object();  // "train.optim", see optim/optim_config.h
};

// Parses the "train" object; unknown fields are errors naming `where` and the field.
TrainConfig train_config_from_json(const nlohmann::json& j, const std::string& where);

}  // namespace zaya
