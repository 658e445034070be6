// The memory plan of one GPU for `zaya info`: what a rank of a data-parallel job holds on an
// 80 GB H100 and a 192 GB MI300X, under bf16 mixed precision (bf16 weights and the Muon
// matrices' gradients; the fp32 master weights and optimizer state of the rank's range only),
// with the memory options a run chooses (train/train_memory.h): activations in fp32 or bf16,
// recompute none / selective / full, ZeRO-1 or ZeRO-2. What sits in host memory beside the GPU
// (the parameters' fp32 copies, a checkpoint's snapshot and its pinned staging) is counted
// apart.
#pragma once

#include <cstdint>
#include <string>

#include "model/config.h"
#include "train/train_memory.h"

namespace zaya {

struct GpuPlanRequest {
  int64_t seq = 4096;        // tokens per sequence
  int world = 1;             // ranks (ZeRO shards over all of them)
  int context_parallel = 1;  // ranks per sequence: each holds seq / context_parallel of it
  int64_t micro_batch = 1;   // sequences per micro-batch
  // The GPU backend as built: bf16 weights and gradients, fp32 activations, ZeRO-1.
  MemoryOptions options{2, 2, 4, Recompute::kNone, 1, true};
};

// The fraction of a device's memory a plan leaves free, at least (10 %): allocator
// fragmentation, the communication library's buffers, and what the estimate misses.
inline constexpr double kPlanHeadroom = 0.10;

// The plan's table for the request, each device's largest micro-batch with the headroom, a
// table of every option's largest micro-batch, and the fewest ranks (a power of two) at which
// micro-batch 1 fits.
std::string format_gpu_memory_plan(const ModelConfig& c, const GpuPlanRequest& request);

}  // namespace zaya
