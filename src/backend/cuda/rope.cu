#include "backend/cuda/ops.h"
#include "backend/cuda/reduce.cuh"

namespace zaya::cuda {

namespace {

// One thread per rotated pair (b, s, h, i < rot/2), in place (cpu::rope_apply).
__global__ void rope_apply_kernel(float* x, const float* cos_t, const float* sin_t, long pairs,
                                  int seq, int heads, int d, int half, float sign) {
  const long p = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= pairs) return;
  const int i = int(p % half);
  const long row = p / half;  // (b·seq + s)·heads + h
  const int s = int((row / heads) % seq);
  float* v = x + size_t(row) * d;
  const float c = cos_t[size_t(s) * half + i], si = sign * sin_t[size_t(s) * half + i];
  const float x1 = v[i], x2 = v[i + half];
  v[i] = x1 * c - x2 * si;
  v[i + half] = x2 * c + x1 * si;
}

}  // namespace

void rope_apply(float* x, const float* cos_t, const float* sin_t, int batch, int seq, int heads,
                int d, int rot, bool inverse) {
  const int half = rot / 2;
  const long pairs = long(batch) * seq * heads * half;
  if (pairs == 0) return;
  ZAYA_LAUNCH(rope_apply_kernel, blocks_for(pairs, 256), 256, 0, 0)
  (x, cos_t, sin_t, pairs, seq, heads, d, half, inverse ? -1.0f : 1.0f);
  ZAYA_CUDA_LAUNCHED("rope_apply");
}

}  // namespace zaya::cuda
