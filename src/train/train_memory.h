// Memory of one training rank, by part: what `zaya size` reports and checks a shape against.
//
// The activations are the step's arena (core/arena.h): every forward and backward buffer of a
// micro-batch comes from it. The forward's stay until the step ends; each stage's backward
// buffers are freed when the stage is done. So its high-water mark is the forward's buffers, the
// gradients passed between stages, and the largest stage backward, each buffer rounded up to 64
// bytes (model/zaya_model.cpp, cca.cpp and moe.cpp take them). With full recompute the forward
// keeps only each stage's input and output and the backward also holds one stage's forward; with
// selective recompute it keeps the products' outputs, and one stage's cheap buffers at a time
// live in a second arena of their own (model/recompute.h).
// `activation_bytes` counts them from the shapes alone (a test holds it to Arena::high_water() of
// real steps). The rest follows the trainer's buffers: fp32 weights and gradients on every rank,
// the optimizer state of the rank's ZeRO-1 range (optim/optimizer.h), the reduce-scatter staging
// (optim/zero1_sync.h), Newton–Schulz workspaces, and the snapshot an asynchronous checkpoint takes
// of the rank's range.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend/op_types.h"
#include "model/config.h"
#include "model/recompute.h"
#include "model/stored_activations.h"

namespace zaya {

// Bytes of the arena after forward + backward of `batch` × `seq` tokens. `routed[k]` is the number
// of tokens that MoE stage k sends to a real expert (not the skip route); empty: the tokens spread
// evenly over the experts and the skip route, as the balancing biases aim for.
// Whole sequences only (context parallelism adds the ring's and halos' buffers).
int64_t activation_bytes(const ModelConfig& c, int64_t batch, int64_t seq,
                         std::span<const int64_t> routed = {}, RecomputePlan recompute = {});
// The same by arena: the step's and selective recompute's (one stage's cheap buffers); with
// `device_inputs`, the step's also holds the tokens, targets and RoPE rows a backend of its own
// memory copies there; with `chunks` enabled (train.lm_head_chunk_*), one block of logits
// instead of all [tokens × vocab].
struct ActivationArenas {
  int64_t step = 0, transient = 0;
  int64_t total() const { return step + transient; }
};
ActivationArenas activation_arenas(const ModelConfig& c, int64_t batch, int64_t seq,
                                   std::span<const int64_t> routed, RecomputePlan recompute,
                                   bool device_inputs, const LmHeadChunks& chunks = {},
                                   ActivationStorage storage = ActivationStorage::kFp32);
// Every token routed to a real expert at every MoE stage, none skipped: the most activations a
// step can take (the experts' buffers grow with the tokens they get).
std::vector<int64_t> every_token_routed(const ModelConfig& c, int64_t tokens);

struct TrainMemory {
  // In the memory the ops compute on: a GPU's, or the host's with the CPU backend.
  int64_t weights = 0;      // every rank (fp32 on CPU, bf16 on a GPU)
  int64_t gradients = 0;    // every rank (reduce-scattered into the range after backward); with
                            // ZeRO-2 those outside the stages and of two stages
  int64_t optimizer = 0;    // AdamW m and v / Muon momentum, update direction (+ bf16: fp32
                            // master weights): the rank's range
  int64_t muon = 0;         // the matrices this rank orthogonalises + Newton–Schulz workspace
  int64_t zero1 = 0;        // the range's reduced gradients + collective staging (world > 1)
  int64_t activations = 0;  // the arena of one micro-batch
  int64_t checkpoint = 0;   // the snapshot of the rank's range while a save is written (host
                            // only: 0 with a device, where it is host_snapshot)
  int64_t runtime = 0;      // the process without a model: code, libraries, thread stacks, BLAS
  // In host memory beside a device (all 0 with the CPU backend, where the above are the host's).
  int64_t host_params = 0;    // the host's copy of every parameter's fp32 weight
  int64_t host_snapshot = 0;  // a checkpoint's snapshot of the range while it is written (the
                              // optimizer state's only host copy), and the copies' pinned staging
  int64_t total() const {
    return weights + gradients + optimizer + muon + zero1 + activations + checkpoint + runtime;
  }
  int64_t host_total() const { return host_params + host_snapshot; }
};

// The memory of one rank out of `world` at `micro_batch` × `seq`; `runtime` comes from the
// hardware profile (measured on CPU, the framework's context on a GPU). `value_bytes` 4 is the
// CPU backend (fp32 throughout); 2 is bf16 mixed precision as a GPU backend keeps it: bf16
// weights, gradients and activations, plus fp32 master weights for the rank's range (the
// target; `zaya size` sizes for it).
TrainMemory train_memory(const ModelConfig& c, int64_t micro_batch, int64_t seq, int world,
                         int64_t runtime, int value_bytes = 4);
// What a run chooses that changes its memory. Weights of 2 bytes are the bf16 weight storage
// (model/zaya_model.h): the products' weights in bf16, the other tensors in fp32, and the fp32
// master weights of the range counted with the optimizer; gradients of 2 bytes are its bf16
// gradients, the Muon matrices' (the embedding's and the other tensors' stay fp32). The GPU
// backend as built keeps bf16 weights and gradients and fp32 activations: {2, 2, 4}.
struct MemoryOptions {
  int weights = 4, gradients = 4, activations = 4;  // bytes per value
  RecomputePlan recompute{};                        // train.recompute (ZayaModel::set_recompute)
  // 1: every rank holds the whole gradient until the reduce-scatter; 2: each bucket moved to its
  // owner as the backward finishes it and its memory given back, so a rank holds the gradients
  // outside the stages and of two stages (ZeRO-2, optim/zero2_reduce.h).
  int zero_stage = 1;
  // The parameters and activations in a device's memory, with the host's copies beside them
  // (the checkpoint snapshot among them); false: the CPU backend, everything in host memory.
  bool device = false;
  LmHeadChunks lm_head_chunks{};  // train.lm_head_chunk_*: none, the logits materialised
};
TrainMemory train_memory(const ModelConfig& c, int64_t micro_batch, int64_t seq, int world,
                         int64_t runtime, MemoryOptions options);
// The activations row of train_memory: one micro-batch's arenas under the options (on a device,
// every token routed to an expert and the inputs copied there; activations of 2 bytes: bf16
// storage, model/stored_activations.h).
int64_t planned_activations(const ModelConfig& c, int64_t micro_batch, int64_t seq,
                            const MemoryOptions& o);

// "123.4 MiB", "2.50 GiB".
std::string format_bytes(double bytes);

}  // namespace zaya
