// Learning-rate schedules and the batch-size ramp. Steps are 0-based optimizer steps.
#pragma once

#include <cstdint>

#include "optim/optim_config.h"

namespace zaya {

// Linear warm-up lr·step/warmup_steps (0 at step 0, lr at step warmup_steps), then
//   cosine:   min_lr + (lr − min_lr)·(1 + cos(π·p))/2, p = (step − warmup)/(total − warmup),
//             reaching min_lr at step total_steps;
//   wsd:      lr until total − D (D = round(decay_fraction·total)), then linear to min_lr at total;
//   constant: lr.
// Steps past total_steps stay at the end value. Throws when the warm-up (or, for WSD, warm-up plus
// decay) does not fit in total_steps.
double learning_rate(const OptimConfig& config, int64_t step, int64_t total_steps);

// Global batch (in sequences) at `step`: start_sequences + (global − start)·step/ramp_steps
// (floored), rounded to the nearest multiple of micro_batch and clamped to [micro_batch, global],
// so every step is a whole number of micro-batches (realised by gradient accumulation). Without a
// ramp, or past ramp_steps, it is global_sequences. global_sequences must be a multiple of
// micro_batch.
int64_t batch_sequences(const OptimConfig& config, int64_t step, int64_t global_sequences,
                        int64_t micro_batch);

}  // namespace zaya
