// The bf16 weight storage's conversions (backend/cpu/bf16_ops.h) and the embedding's gather from
// fp32 or bf16 weights (WeightRef: the model's bf16 copy or storage of the tied embedding).
#include "backend/cuda/bf16.cuh"
#include "backend/cuda/ops.h"
#include "backend/cuda/reduce.cuh"

namespace zaya::cuda {

namespace {

__global__ void round_to_bf16_kernel(uint16_t* dst, const float* src, long n) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = f32_to_bf16(src[i]);
}

__global__ void widen_bf16_kernel(float* dst, const uint16_t* src, long n) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = bf16_to_f32(src[i]);
}

__global__ void gather_bf16_rows_kernel(float* out, const uint16_t* table, const int32_t* tokens,
                                        long total, int e) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const long t = i / e, j = i % e;
  out[i] = bf16_to_f32(table[size_t(tokens[t]) * size_t(e) + size_t(j)]);
}

}  // namespace

void round_to_bf16(uint16_t* dst, const float* src, size_t n) {
  if (n == 0) return;
  ZAYA_LAUNCH(round_to_bf16_kernel, blocks_for(long(n), 256), 256, 0, 0)(dst, src, long(n));
  ZAYA_CUDA_LAUNCHED("round_to_bf16");
}

void widen_bf16(float* dst, const uint16_t* src, size_t n) {
  if (n == 0) return;
  ZAYA_LAUNCH(widen_bf16_kernel, blocks_for(long(n), 256), 256, 0, 0)(dst, src, long(n));
  ZAYA_CUDA_LAUNCHED("widen_bf16");
}

void embedding_forward(float* out, WeightRef table, const int32_t* tokens, int n, int e) {
  const long total = long(n) * e;
  if (total == 0) return;
  // With bf16 products the embedding is a product's weight (the tied LM head): the gather reads
  // the same bf16 values the head does.
  if (table.is_bf16()) {
    ZAYA_LAUNCH(gather_bf16_rows_kernel, blocks_for(total, 256), 256, 0, 0)
    (out, table.bf16_values(), tokens, total, e);
    ZAYA_CUDA_LAUNCHED("embedding_forward (bf16)");
    return;
  }
  gather_rows(out, table.f32(), tokens, n, e);
}

}  // namespace zaya::cuda
