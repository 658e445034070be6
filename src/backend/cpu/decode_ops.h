// The decode steps of CCA and of attention over a paged cache (infer/batch_decoder.h): every
// row's result is computed by the same code whatever the other rows, so a sequence decodes to the
// same bits alone or in a batch. The products are rows_matmul_forward (backend/cpu/rowwise.h).
#pragma once

#include "backend/cpu/cpu_path_target.h"

#include <cstdint>

#include "backend/op_types.h"

namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

// z[r] ([C], C = (nq+nk)·d) for each decode row r: the depthwise convolution rows a[t] (from the
// state's u[t-2], u[t-1]) and a[t+1] (from u[t-1] and the row's u[t] = proj[r][0:C]), the grouped
// convolution z[t] = W0·a[t] + W1·a[t+1] + bias per head group (backend/cpu/conv.h), then the
// q-k-mean skip (cca_mix_forward's, model/cca.cpp). The state is the row slots[r] of `window`.
void cca_decode_conv(float* z, const float* proj, const float* window, const int32_t* slots,
                     const CcaDecodeStep& s);

// For each row r: where kv_rows[2r] >= 0, the cache entry of its position, the key
// qkn[r][nq·d : C] to row kv_rows[2r] of `kv` ([rows, nk·d]) and the value v_cur ‖ v_prev (the
// value shift) to row kv_rows[2r+1]; then the state moves one position on (window rows shift,
// the new one is proj[r][0:C]; v_prev becomes proj[r]'s v_prev_raw).
void cca_decode_advance(float* window, float* v_prev, float* kv, const int64_t* kv_rows,
                        const float* qkn, const float* proj, const int32_t* slots,
                        const CcaDecodeStep& s);

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
