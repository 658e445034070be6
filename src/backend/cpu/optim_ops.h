// The optimizer's arithmetic as ops (optim/optimizer.h does the bookkeeping: which tensors, which
// constants, the ZeRO-1 exchange). Buffers are plain fp32 arrays; segment tables are host memory
// and address every buffer of a call at the same offsets.
#pragma once

#include "backend/cpu/cpu_path_target.h"

#include <cstdint>

#include "backend/optim_types.h"

namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

// Σ over chunks, in table order, of each chunk's fp64 Σ x² (a chunk summed in element order):
// the gradient norm's partition is fixed by the table, not by the thread count.
double sum_of_squares_chunks(const float* x, const OptimSegment* chunks, int count);
// x *= s over every segment (gradient clipping).
void scale_segments(float* x, const OptimSegment* segments, int count, float s);
// AdamW per element, with the segment's keep:
//   m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²;  w ← w·keep − step_size·m / (√v·inv_sqrt_bc2 + ε).
void adamw_update(float* w, const float* g, float* m, float* v, const OptimSegment* segments,
                  int count, const AdamwConstants& c);
// Muon's momentum: buf ← β·buf + (1−β)·g;  d ← (1−β)·g + β·buf (Nesterov) or buf.
void muon_momentum(float* buf, float* d, const float* g, const OptimSegment* segments, int count,
                   float beta, float one_minus_beta, bool nesterov);
// w ← w·keep − step·d per segment (Muon's weight update with its per-matrix step).
void decay_and_step(float* w, const float* d, const OptimSegment* segments, int count);
// Newton–Schulz (backend/newton_schulz.h) in place on `count` matrices of one shape [rows, cols],
// one after another: each result is that of newton_schulz on the matrix alone.
void newton_schulz_batch(float* const* matrices, int count, int64_t rows, int64_t cols, int steps);

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
