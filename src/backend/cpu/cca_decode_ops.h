// CCA's decode step (infer/batch_decoder.h): the convolutions over each sequence's state and the
// state moved on. Every row's result is computed by the same code whatever the other rows, so a
// sequence decodes to the same bits alone or in a batch. The attention over the cache is
// backend/cpu/decode_ops.h; the products are rows_matmul_forward (backend/cpu/rowwise.h).
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

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
