// The decode step's attention over a paged cache (infer/batch_decoder.h): every row's result is
// computed by the same code whatever the other rows, so a sequence decodes to the same bits alone
// or in a batch. CCA's convolutions are backend/cpu/cca_decode_ops.h; the products are
// rows_matmul_forward (backend/cpu/rowwise.h).
#pragma once

#include "backend/cpu/cpu_path_target.h"

#include <cstdint>

#include "backend/op_types.h"

namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

// Attention partials of queries q[n, nq·d] over each row's cached positions (tree attention,
// infer/kv_attention.h): per (row, query head) item, m = max score, l = Σ exp(score − m) and
// out = Σ exp(score − m)·v, scale 1/sqrt(d), query head h reading key head h / (nq / nk); the
// scores in position order, each a dot product in order of the head dimension, exp = fast_exp.
// A row with no position gets m = −inf, l = 0, out = 0. scores holds n·nq·max_blocks·block_size
// floats.
void kv_attention_partials(float* max, float* sum, float* out, float* scores, const float* q,
                           const PagedKv& kv, int n, int nq, int nk, int d);

// att[i·d + x] = out[i·d + x] · (1 / sum[i]) for items i: one rank's partials made attention.
void kv_attention_normalize(float* att, const float* sum, const float* out, int items, int d);

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
