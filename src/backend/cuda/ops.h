// The GPU ops, with the CPU backend's conventions (backend/cpu/*.h): pointers are device memory,
// row-major; `*_forward` overwrites its outputs; `*_backward` ADDS into the gradient buffers it is
// given and skips any that are nullptr. Each op computes what its cpu:: namesake computes, in
// fp32 with the same fp64 accumulations, and is held to it by tests/gpu (every reduction runs in
// a fixed order, so a GPU run is bitwise reproducible). Launches go to the default stream.
//
// The Backend's ops are declared here from their one list, backend/backend_ops.inc: each is a
// cuda:: function of the same signature, defined in the .cu file of its kind, which
// CudaBackend forwards to (cuda_backend.cu). An op added to that list is declared here by itself;
// its kernel is then written in a .cu file. What the GPU versions add to the list's notes:
// - host values: cross_entropy_forward, lm_head_loss_forward and sum_of_squares_chunks copy their
//   per-row or per-chunk partials to the host and sum them there in order (one explicit copy);
//   grouped_matmul_*'s offsets and the optimizer's segment and chunk tables are HOST memory,
//   uploaded by each call (a few hundred bytes to kilobytes, once per step);
// - matmul_* and grouped_matmul_* run through cuBLASLt in fp32 (no TF32), with bf16 inputs under
//   Bf16Gemms: a bf16 weight (WeightRef::bf16) as it is, every other input rounded by the
//   product; a bf16 weight gradient (GradRef::bf16) as cuBLASLt's bf16 C (the sum in fp32, one
//   rounding). The fp32 backend refuses bf16 weights; newton_schulz_batch stacks the matrices and
//   runs each of the iteration's three products as one strided-batched GEMM (fp32, also on the bf16
//   backend);
// - attention_block_forward, attention_row_dot and attention_block_backward have no kernels yet
//   (ring attention runs on host memory only): each fails, naming itself;
// - sort_by_route is a stable counting sort (deterministic, dropless); embedding_backward adds
//   in token order.
// Below the list: what only the GPU backend has.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/op_types.h"
#include "backend/optim_types.h"
#include "backend/weight_ref.h"

namespace zaya::cuda {

#define ZAYA_BACKEND_OP(ret, name, params, args) ret name params;
#include "backend/backend_ops.inc"
#undef ZAYA_BACKEND_OP

// The step's loss from the per-row losses on the device (0 at ignored targets): one explicit
// copy of the rows and targets, summed on the host in row order; *count = rows with a target.
// Shared by cross_entropy_forward and lm_head_loss_forward.
double sum_row_losses(const double* row_loss, const int32_t* targets, int n, int64_t* count);

// lm_head_loss_* with the blocks as chunk_tokens × chunk_vocab logits; scratch holds one block.
double lm_head_loss_forward(float* lse, const float* y, WeightRef w, const int32_t* targets, int n,
                            int e, int v, int chunk_tokens, int chunk_vocab, float* scratch,
                            int64_t* count);
void lm_head_loss_backward(float* dy, GradRef dw, const float* y, WeightRef w, const float* lse,
                           const int32_t* targets, int n, int e, int v, float loss_scale,
                           int chunk_tokens, int chunk_vocab, float* scratch);

// Mixed precision for the ops called while it lives (the bf16 CUDA backend sets it around each
// op): every matrix product rounds its two inputs to bf16 (weights and activations alike; round
// to nearest even) and accumulates in fp32 into its fp32 output. Everything else stays fp32: the
// residual stream, norms and softmax statistics, the loss, gradients and master weights.
class Bf16Gemms {
 public:
  explicit Bf16Gemms(bool on);
  ~Bf16Gemms();
  Bf16Gemms(const Bf16Gemms&) = delete;
  Bf16Gemms& operator=(const Bf16Gemms&) = delete;

 private:
  bool previous_;
};

}  // namespace zaya::cuda
