// The memory plan of one GPU for `zaya info`: what a rank of a ZeRO-1 job holds on an 80 GB H100
// and a 192 GB MI300X, under bf16 mixed precision (bf16 weights, gradients and activations; the
// fp32 master weights and optimizer state of the rank's range only). ZAYA1-base's fp32 weights
// and gradients alone are 70.7 GB, so this split is what makes it fit. The figures come from
// train/train_memory.h (the GPU backend is not built yet: estimates, as `zaya size` says).
#pragma once

#include <cstdint>
#include <string>

#include "model/config.h"

namespace zaya {

// The table for `world` ranks at micro-batch 1 × `seq` tokens, each device's largest micro-batch
// (a power of two up to 64) and the fewest ranks (a power of two) at which micro-batch 1 fits.
std::string format_gpu_memory_plan(const ModelConfig& c, int64_t seq, int world);

}  // namespace zaya
