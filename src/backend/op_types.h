// The types of the backend's ops beyond plain buffers and the optimizer's (backend_ops.inc;
// backend/optim_types.h has those): how the LM head's loss is chunked, the target that takes no
// loss, and one block of a sharded attention. Every backend and the model above them share these;
// backend/cpu/*.h say what the ops that take them compute.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace zaya {

constexpr int32_t kIgnoreIndex = -100;  // a target that contributes no loss (Hugging Face's value)

// The blocks of the fused LM head and loss (backend/cpu/lm_head_loss.h).
struct LmHeadChunks {
  int tokens = 0;  // rows of a block (0: not chunked)
  int vocab = 0;   // columns of a block
  bool enabled() const { return tokens > 0 && vocab > 0; }
  // Floats of the one logits block the ops need as scratch.
  size_t scratch_floats(int n, int v) const {
    return size_t(std::min(tokens, n)) * size_t(std::min(vocab, v));
  }
};

// One block of a sharded attention (ring attention, model/ring_attention.h;
// backend/cpu/attention.h computes it): queries of q_len positions against keys/values of k_len
// positions, either all visible (keys earlier in the sequence) or causal on the diagonal (the same
// positions: q_len == k_len). Rows of every sequence are [len, heads, d]; the strides say where
// sequence b starts, so a block can be a run of rows inside a larger buffer.
struct AttentionBlock {
  int batch = 0, q_len = 0, k_len = 0, nq = 0, nk = 0, d = 0;
  size_t q_batch_stride = 0;   // floats between sequences of q, out, dout, dq
  size_t kv_batch_stride = 0;  // floats between sequences of k, v, dk, dv
  bool causal = false;
  float scale = 1.0f;
};

// A CCA stage's decode step for n rows, each a sequence's new token (model/cca_decode.h;
// backend/cpu/decode_ops.h computes it). The fused projection's row is
// [q0 (nq·d) | k0 (nk·d) | v_cur (nk·d/2) | v_prev_raw (nk·d/2)]; a sequence's convolution state is
// the row `slot` of `window` ([slots, 2, C]: q0 ‖ k0 of its last two positions) and of `v_prev`
// ([slots, nk·d/2]). The weights are the stage's two convolutions' (model/cca.h).
struct CcaDecodeStep {
  int n = 0, nq = 0, nk = 0, d = 0;
  const float* conv0_w = nullptr;  // [C, 2] depthwise
  const float* conv0_b = nullptr;  // [C]
  const float* conv1_w = nullptr;  // [C, d, 2] grouped
  const float* conv1_b = nullptr;  // [C]
};

// The cache of one attention stage in a pool of blocks (infer/kv_blocks.h) and which blocks each
// decode row reads: row r's i-th block is blocks[r·max_blocks + i], holding counts[...] positions
// (a count of 0 ends the row's list). A block's keys are [block_size, nk·d] at
// keys + block·block_stride, its values values_offset floats after them.
struct PagedKv {
  const float* keys = nullptr;
  int64_t block_stride = 0, values_offset = 0;
  const int32_t* blocks = nullptr;
  const int32_t* counts = nullptr;
  int max_blocks = 0, block_size = 0;
};

namespace cpu {
// The names the CPU op set gave them before they were the backend's (the tests still spell them
// cpu::kIgnoreIndex and cpu::LmHeadChunks).
using zaya::kIgnoreIndex;
using zaya::LmHeadChunks;
}  // namespace cpu

}  // namespace zaya
