// The MoE layer's data movement on the device (model/moe.cpp's host loops), so a step reads no
// route on the host except the (explicit) copy of the per-route offsets the expert GEMMs need:
// the top-1 choice, a stable counting sort of tokens by route (token order kept inside a route:
// deterministic, dropless), the gather into expert order, the gated combine and its backward,
// the scatter back, and the grouped (per-expert) products through cuBLASLt.
#include <vector>

#include "backend/cuda/device.h"
#include "backend/cuda/ops.h"
#include "backend/cuda/reduce.cuh"

namespace zaya::cuda {

namespace {

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

__global__ void gelu_forward_kernel(float* out, const float* in, long n) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 0.5f * in[i] * (1.0f + erff(in[i] * kInvSqrt2));
}

__global__ void gelu_backward_kernel(float* din, const float* dout, const float* in, long n) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float x = in[i];
  const float cdf = 0.5f * (1.0f + erff(x * kInvSqrt2));
  const float pdf = kInvSqrt2Pi * expf(-0.5f * x * x);
  din[i] += dout[i] * (cdf + x * pdf);
}

// model/moe.h top1_route: the first route with the largest probability + bias.
__global__ void top1_kernel(int32_t* route, const float* probs, const float* biases, int n,
                            int routes) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  const float* p = probs + size_t(t) * routes;
  int best = 0;
  float best_v = p[0] + biases[0];
  for (int e = 1; e < routes; ++e) {
    const float v = p[e] + biases[e];
    if (v > best_v) best = e, best_v = v;
  }
  route[t] = best;
}

// One block: thread e counts route e's tokens, the offsets are their prefix sums, then thread e
// writes its tokens in token order. O(tokens × routes) work with no atomics: the same order on
// every run (a two-level sort is the faster form, with the same result).
__global__ void sort_by_route_kernel(int32_t* order, int32_t* offsets, const int32_t* route, int n,
                                     int routes) {
  ZAYA_DYNAMIC_SHARED(int32_t, counts);  // routes + 1
  for (int e = threadIdx.x; e < routes; e += blockDim.x) {
    int32_t c = 0;
    for (int t = 0; t < n; ++t) c += route[t] == e;
    counts[e + 1] = c;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    counts[0] = 0;
    for (int e = 0; e < routes; ++e) counts[e + 1] += counts[e];
    for (int e = 0; e <= routes; ++e) offsets[e] = counts[e];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < routes; e += blockDim.x) {
    int32_t at = counts[e];
    for (int t = 0; t < n; ++t)
      if (route[t] == e) order[at++] = t;
  }
}

__global__ void gather_rows_kernel(float* out, const float* in, const int32_t* order, long total,
                                   int width) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const long row = i / width;
  out[i] = in[size_t(order[row]) * width + i % width];
}

// order is a permutation: every destination row has one source, so += has one writer.
__global__ void scatter_add_rows_kernel(float* out, const float* in, const int32_t* order,
                                        long total, int width) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const long row = i / width;
  out[size_t(order[row]) * width + i % width] += in[i];
}

// out[t] = p_t · src, src = the expert output (rows i < n_exp, expert order) or x[t] (skip).
__global__ void combine_forward_kernel(float* out, const float* y, const float* x,
                                       const float* probs, const int32_t* route,
                                       const int32_t* order, int n_exp, long total, int E,
                                       int routes) {
  const long k = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= total) return;
  const int i = int(k / E), j = int(k % E), t = order[i];
  const float gate = probs[size_t(t) * routes + route[t]];
  const float src = i < n_exp ? y[size_t(i) * E + j] : x[size_t(t) * E + j];
  out[size_t(t) * E + j] = gate * src;
}

// One warp per token (expert order i): dprobs[t, route] = dout·src (fp64 per lane, then the warp
// butterfly); dy[i] = gate·dout for expert tokens, dx[t] += gate·dout for skipped ones.
__global__ void combine_backward_kernel(float* dprobs, float* dy, float* dx, const float* dout,
                                        const float* y, const float* x, const float* probs,
                                        const int32_t* route, const int32_t* order, int n,
                                        int n_exp, int E, int routes) {
  const int i = int((long(blockIdx.x) * blockDim.x + threadIdx.x) / ZAYA_WARP_SIZE);
  const int lane = threadIdx.x % ZAYA_WARP_SIZE;
  if (i >= n) return;
  const int t = order[i];
  const float gate = probs[size_t(t) * routes + route[t]];
  const float* d = dout + size_t(t) * E;
  const float* src = i < n_exp ? y + size_t(i) * E : x + size_t(t) * E;
  double dot = 0.0;
  for (int j = lane; j < E; j += ZAYA_WARP_SIZE) dot += double(d[j]) * src[j];
  for (int o = ZAYA_WARP_SIZE / 2; o > 0; o /= 2) dot += ZAYA_SHFL_XOR(dot, o);
  if (lane == 0) dprobs[size_t(t) * routes + route[t]] = float(dot);
  for (int j = lane; j < E; j += ZAYA_WARP_SIZE) {
    if (i < n_exp)
      dy[size_t(i) * E + j] = gate * d[j];
    else
      dx[size_t(t) * E + j] += gate * d[j];
  }
}

// EDA: state[t, j] += scale[j]·state_in[t, j].
__global__ void eda_forward_kernel(float* state, const float* scale, const float* state_in,
                                   long total, int R) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < total) state[i] += scale[i % R] * state_in[i];
}

// dscale[j] += Σ_t dstate·state_in (rows in order, fp64); dstate_in += scale ⊙ dstate.
__global__ void eda_backward_scale_kernel(float* dscale, const float* dstate, const float* state_in,
                                          int n, int R) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= R) return;
  double s = 0.0;
  for (int t = 0; t < n; ++t) s += double(dstate[size_t(t) * R + j]) * state_in[size_t(t) * R + j];
  dscale[j] += float(s);
}

__global__ void eda_backward_input_kernel(float* dstate_in, const float* scale, const float* dstate,
                                          long total, int R) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < total) dstate_in[i] += scale[i % R] * dstate[i];
}

}  // namespace

void eda_forward(float* state, const float* scale, const float* state_in, int n, int R) {
  const long total = long(n) * R;
  if (total == 0) return;
  ZAYA_LAUNCH(eda_forward_kernel, blocks_for(total, 256), 256, 0, 0)
  (state, scale, state_in, total, R);
  ZAYA_CUDA_LAUNCHED("eda_forward");
}

void eda_backward(float* dscale, float* dstate_in, const float* dstate, const float* state_in,
                  const float* scale, int n, int R) {
  const long total = long(n) * R;
  if (dscale && R > 0) {
    ZAYA_LAUNCH(eda_backward_scale_kernel, blocks_for(R, 128), 128, 0, 0)
    (dscale, dstate, state_in, n, R);
    ZAYA_CUDA_LAUNCHED("eda_backward (scale)");
  }
  if (dstate_in && total > 0) {
    ZAYA_LAUNCH(eda_backward_input_kernel, blocks_for(total, 256), 256, 0, 0)
    (dstate_in, scale, dstate, total, R);
    ZAYA_CUDA_LAUNCHED("eda_backward (input)");
  }
}

void gelu_forward(float* out, const float* in, long n) {
  if (n == 0) return;
  ZAYA_LAUNCH(gelu_forward_kernel, blocks_for(n, 256), 256, 0, 0)(out, in, n);
  ZAYA_CUDA_LAUNCHED("gelu_forward");
}

void gelu_backward(float* din, const float* dout, const float* in, long n) {
  if (n == 0 || !din) return;
  ZAYA_LAUNCH(gelu_backward_kernel, blocks_for(n, 256), 256, 0, 0)(din, dout, in, n);
  ZAYA_CUDA_LAUNCHED("gelu_backward");
}

void top1_routes(int32_t* route, const float* probs, const float* biases, int n, int routes) {
  if (n == 0) return;
  ZAYA_LAUNCH(top1_kernel, blocks_for(n, 128), 128, 0, 0)(route, probs, biases, n, routes);
  ZAYA_CUDA_LAUNCHED("top1_routes");
}

void sort_by_route(int32_t* order, int32_t* offsets, const int32_t* route, int n, int routes) {
  ZAYA_LAUNCH(sort_by_route_kernel, 1, 128, sizeof(int32_t) * size_t(routes + 1), 0)
  (order, offsets, route, n, routes);
  ZAYA_CUDA_LAUNCHED("sort_by_route");
}

void gather_rows(float* out, const float* in, const int32_t* order, int rows, int width) {
  const long total = long(rows) * width;
  if (total == 0) return;
  ZAYA_LAUNCH(gather_rows_kernel, blocks_for(total, 256), 256, 0, 0)(out, in, order, total, width);
  ZAYA_CUDA_LAUNCHED("gather_rows");
}

void scatter_add_rows(float* out, const float* in, const int32_t* order, int rows, int width) {
  const long total = long(rows) * width;
  if (total == 0) return;
  ZAYA_LAUNCH(scatter_add_rows_kernel, blocks_for(total, 256), 256, 0, 0)
  (out, in, order, total, width);
  ZAYA_CUDA_LAUNCHED("scatter_add_rows");
}

void moe_combine_forward(float* out, const float* y, const float* x, const float* probs,
                         const int32_t* route, const int32_t* order, int n, int n_exp, int E,
                         int routes) {
  const long total = long(n) * E;
  if (total == 0) return;
  ZAYA_LAUNCH(combine_forward_kernel, blocks_for(total, 256), 256, 0, 0)
  (out, y, x, probs, route, order, n_exp, total, E, routes);
  ZAYA_CUDA_LAUNCHED("moe_combine_forward");
}

void moe_combine_backward(float* dprobs, float* dy, float* dx, const float* dout, const float* y,
                          const float* x, const float* probs, const int32_t* route,
                          const int32_t* order, int n, int n_exp, int E, int routes) {
  if (n == 0) return;
  const int warps_per_block = 4;
  ZAYA_LAUNCH(combine_backward_kernel, blocks_for(n, warps_per_block),
              warps_per_block * ZAYA_WARP_SIZE, 0, 0)
  (dprobs, dy, dx, dout, y, x, probs, route, order, n, n_exp, E, routes);
  ZAYA_CUDA_LAUNCHED("moe_combine_backward");
}

void grouped_matmul_forward(float* out, const float* in, const float* const* weights,
                            const int* offsets, int groups, int k, int m) {
  for (int g = 0; g < groups; ++g) {
    const int rows = offsets[g + 1] - offsets[g];  // experts with no token: no product
    if (rows > 0)
      matmul_forward(out + size_t(offsets[g]) * m, in + size_t(offsets[g]) * k, weights[g], nullptr,
                     rows, k, m);
  }
}

void grouped_matmul_backward(float* din, float* const* dweights, const float* dout, const float* in,
                             const float* const* weights, const int* offsets, int groups, int k,
                             int m) {
  for (int g = 0; g < groups; ++g) {
    const int rows = offsets[g + 1] - offsets[g];
    if (rows > 0)
      matmul_backward(din ? din + size_t(offsets[g]) * k : nullptr,
                      dweights ? dweights[g] : nullptr, nullptr, dout + size_t(offsets[g]) * m,
                      in + size_t(offsets[g]) * k, weights[g], rows, k, m);
  }
}

}  // namespace zaya::cuda
