// The MoE layer's data movement on the device (model/moe.cpp's host loops), so a step reads no
// route on the host except the (explicit) copy of the per-route offsets the expert GEMMs need:
// the top-1 choice, a stable counting sort of tokens by route (token order kept inside a route:
// deterministic, dropless), the gather into expert order, the gated combine and its backward,
// the scatter back, and the grouped (per-expert) products through cuBLASLt.
#include <algorithm>
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

// The stable counting sort of tokens by route in three launches, parallel over chunks of
// kSortChunk tokens and with no atomics, so the order is the same on every run: (1) each chunk
// counts its tokens per route; (2) one block turns the counts into each (chunk, route)'s first
// slot: the routes' offsets (prefix sums of their totals) plus the same route's tokens in
// earlier chunks; (3) each token goes to its (chunk, route) slot plus the number of earlier
// tokens of its chunk on its route.
constexpr int kSortChunk = 256;  // tokens per chunk: the block of (1) and (3)

// Block c: counts[c · routes + e] = the tokens of chunk c on route e.
__global__ void route_chunk_counts_kernel(int32_t* counts, const int32_t* route, int n,
                                          int routes) {
  __shared__ int32_t chunk[kSortChunk];
  const int t0 = int(blockIdx.x) * kSortChunk, m = min(kSortChunk, n - t0);
  for (int i = int(threadIdx.x); i < m; i += int(blockDim.x)) chunk[i] = route[t0 + i];
  __syncthreads();
  for (int e = int(threadIdx.x); e < routes; e += int(blockDim.x)) {
    int32_t c = 0;
    for (int i = 0; i < m; ++i) c += chunk[i] == e;
    counts[size_t(blockIdx.x) * routes + e] = c;
  }
}

// One block: thread e walks the chunks in order, turning counts[c, e] into the slot of chunk c's
// first token on route e; offsets (routes + 1) are the routes' prefix sums.
__global__ void route_slots_kernel(int32_t* counts, int32_t* offsets, int chunks, int routes) {
  ZAYA_DYNAMIC_SHARED(int32_t, totals);  // routes + 1
  for (int e = int(threadIdx.x); e < routes; e += int(blockDim.x)) {
    int32_t total = 0;
    for (int c = 0; c < chunks; ++c) {
      const int32_t k = counts[size_t(c) * routes + e];
      counts[size_t(c) * routes + e] = total;
      total += k;
    }
    totals[e + 1] = total;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    totals[0] = 0;
    for (int e = 0; e < routes; ++e) totals[e + 1] += totals[e];
  }
  __syncthreads();
  for (int e = int(threadIdx.x); e <= routes; e += int(blockDim.x)) offsets[e] = totals[e];
  for (int e = int(threadIdx.x); e < routes; e += int(blockDim.x))
    for (int c = 0; c < chunks; ++c) counts[size_t(c) * routes + e] += totals[e];
}

// Block c: token t0 + i goes to slot[c, route] + (its chunk's earlier tokens on that route).
__global__ void route_scatter_kernel(int32_t* order, const int32_t* slots, const int32_t* route,
                                     int n, int routes) {
  __shared__ int32_t chunk[kSortChunk];
  const int t0 = int(blockIdx.x) * kSortChunk, m = min(kSortChunk, n - t0);
  for (int i = int(threadIdx.x); i < m; i += int(blockDim.x)) chunk[i] = route[t0 + i];
  __syncthreads();
  for (int i = int(threadIdx.x); i < m; i += int(blockDim.x)) {
    const int32_t e = chunk[i];
    int32_t rank = 0;
    for (int k = 0; k < i; ++k) rank += chunk[k] == e;
    order[slots[size_t(blockIdx.x) * routes + e] + rank] = t0 + i;
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

// dscale[j] += Σ_t dstate·state_in (fp64, by column_sums: reduce.cuh); dstate_in += scale ⊙
// dstate.
__global__ void eda_backward_scale_kernel(float* dscale, const float* dstate, const float* state_in,
                                          int n, int R) {
  const long j = tile_column();
  double s[1];
  if (column_sums(s, n, j < R, [&](long t, auto& acc) {
        acc[0] += double(dstate[size_t(t) * R + j]) * state_in[size_t(t) * R + j];
      }))
    dscale[j] += float(s[0]);
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
    ZAYA_LAUNCH(eda_backward_scale_kernel, blocks_for(R, kColumnTile), kColumnThreads, 0, 0)
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
  const int chunks = int(blocks_for(n, kSortChunk));
  ScratchBuffer<int32_t> slots{std::max<size_t>(1, size_t(chunks) * size_t(routes))};
  if (chunks > 0) {
    ZAYA_LAUNCH(route_chunk_counts_kernel, chunks, kSortChunk, 0, 0)(slots.get(), route, n, routes);
    ZAYA_CUDA_LAUNCHED("sort_by_route (counts)");
  }
  ZAYA_LAUNCH(route_slots_kernel, 1, 128, sizeof(int32_t) * size_t(routes + 1), 0)
  (slots.get(), offsets, chunks, routes);
  ZAYA_CUDA_LAUNCHED("sort_by_route (slots)");
  if (chunks > 0) {
    ZAYA_LAUNCH(route_scatter_kernel, chunks, kSortChunk, 0, 0)
    (order, slots.get(), route, n, routes);
    ZAYA_CUDA_LAUNCHED("sort_by_route (scatter)");
  }
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

void grouped_matmul_forward(float* out, const float* in, const WeightRef* weights,
                            const int* offsets, int groups, int k, int m) {
  for (int g = 0; g < groups; ++g) {
    const int rows = offsets[g + 1] - offsets[g];  // experts with no token: no product
    if (rows > 0)
      matmul_forward(out + size_t(offsets[g]) * m, in + size_t(offsets[g]) * k, weights[g], nullptr,
                     rows, k, m);
  }
}

void grouped_matmul_backward(float* din, const GradRef* dweights, const float* dout,
                             const float* in, const WeightRef* weights, const int* offsets,
                             int groups, int k, int m) {
  for (int g = 0; g < groups; ++g) {
    const int rows = offsets[g + 1] - offsets[g];
    if (rows > 0)
      matmul_backward(din ? din + size_t(offsets[g]) * k : nullptr,
                      dweights ? dweights[g] : GradRef(), nullptr, dout + size_t(offsets[g]) * m,
                      in + size_t(offsets[g]) * k, weights[g], rows, k, m);
  }
}

}  // namespace zaya::cuda
