// The optimizer's ops on the GPU (backend/cpu/optim_ops.h defines each). The elementwise updates
// run over a table of segments in one launch: thread j of the launch takes element j of the
// segments laid end to end, finding its segment by binary search over their running starts, so
// the AdamW group of ZAYA1-base (hundreds of tensors) is one kernel, not one per tensor. Each
// element's expression is the CPU's, term for term; nvcc and the host compiler may contract
// different products into fused multiply-adds, so the two agree to rounding, not bitwise (the
// tests hold them to 1e-5). No order questions arise but in the norm.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cuda/device.h"
#include "backend/cuda/ops.h"
#include "backend/cuda/reduce.cuh"

namespace zaya::cuda {

namespace {

// The segments of one call in device memory, empty ones dropped: where each starts in the
// buffers and in the launch, and its keep and step. One upload (each from pageable memory waits
// for the device): [begin × count | first × count | keep × count, step × count as floats].
struct SegmentTable {
  ScratchBuffer<int64_t> packed;
  const int64_t *begin = nullptr, *first = nullptr;  // first: the segment's first launch thread
  const float *keep = nullptr, *step = nullptr;
  int count = 0;
  int64_t total = 0;

  SegmentTable(const OptimSegment* segments, int n) {
    std::vector<int64_t> b, f;
    std::vector<float> k, s;
    for (int i = 0; i < n; ++i) {
      if (segments[i].n == 0) continue;
      b.push_back(segments[i].begin);
      f.push_back(total);
      k.push_back(segments[i].keep);
      s.push_back(segments[i].step);
      total += segments[i].n;
    }
    count = int(b.size());
    if (count == 0) return;
    const size_t c = size_t(count);
    std::vector<int64_t> host(3 * c);  // the last c slots hold the 2c floats
    std::copy(b.begin(), b.end(), host.begin());
    std::copy(f.begin(), f.end(), host.begin() + long(c));
    std::memcpy(host.data() + 2 * c, k.data(), c * sizeof(float));
    std::memcpy(reinterpret_cast<char*>(host.data() + 2 * c) + c * sizeof(float), s.data(),
                c * sizeof(float));
    packed = ScratchBuffer<int64_t>(host);
    begin = packed.get();
    first = packed.get() + c;
    keep = reinterpret_cast<const float*>(packed.get() + 2 * c);
    step = keep + c;
  }
};

// The segment of launch element j: the last one whose first thread is <= j.
__device__ int segment_of(const int64_t* first, int count, int64_t j) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (first[mid] <= j)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

constexpr int kThreads = 256;

__global__ void sum_of_squares_chunks_kernel(double* partial, const float* x, const int64_t* begin,
                                             const int64_t* count) {
  __shared__ double shared[kRowThreads];
  const float* p = x + begin[blockIdx.x];
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < count[blockIdx.x]; i += kRowThreads)
    s += double(p[i]) * double(p[i]);
  s = block_sum(s, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void scale_kernel(float* x, const int64_t* begin, const int64_t* first, int count,
                             int64_t total, float s) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= total) return;
  const int k = segment_of(first, count, j);
  x[begin[k] + (j - first[k])] *= s;
}

__global__ void adamw_kernel(float* w, const float* g, float* m, float* v, const int64_t* begin,
                             const int64_t* first, const float* keep, int count, int64_t total,
                             AdamwConstants c) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= total) return;
  const int k = segment_of(first, count, j);
  const int64_t i = begin[k] + (j - first[k]);
  m[i] = c.beta1 * m[i] + c.one_minus_beta1 * g[i];
  v[i] = c.beta2 * v[i] + c.one_minus_beta2 * g[i] * g[i];
  w[i] = w[i] * keep[k] - c.step_size * m[i] / (sqrtf(v[i]) * c.inv_sqrt_bc2 + c.eps);
}

__global__ void muon_momentum_kernel(float* buf, float* d, const float* g, const int64_t* begin,
                                     const int64_t* first, int count, int64_t total, float beta,
                                     float one_minus_beta, bool nesterov) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= total) return;
  const int k = segment_of(first, count, j);
  const int64_t i = begin[k] + (j - first[k]);
  buf[i] = beta * buf[i] + one_minus_beta * g[i];
  d[i] = nesterov ? one_minus_beta * g[i] + beta * buf[i] : buf[i];
}

__global__ void decay_and_step_kernel(float* w, const float* d, const int64_t* begin,
                                      const int64_t* first, const float* keep, const float* step,
                                      int count, int64_t total) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= total) return;
  const int k = segment_of(first, count, j);
  const int64_t i = begin[k] + (j - first[k]);
  w[i] = w[i] * keep[k] - step[k] * d[i];
}

}  // namespace

double sum_of_squares_chunks(const float* x, const OptimSegment* chunks, int count) {
  if (count == 0) return 0.0;
  std::vector<int64_t> host(2 * size_t(count));  // [begin × count | n × count]: one upload
  for (int i = 0; i < count; ++i) {
    host[size_t(i)] = chunks[i].begin;
    host[size_t(count + i)] = chunks[i].n;
  }
  ScratchBuffer<int64_t> table(host);
  ScratchBuffer<double> partial(static_cast<size_t>(count));
  ZAYA_LAUNCH(sum_of_squares_chunks_kernel, unsigned(count), kRowThreads, 0, 0)
  (partial.get(), x, table.get(), table.get() + count);
  ZAYA_CUDA_LAUNCHED("sum_of_squares_chunks");
  double total = 0.0;
  for (const double p : partial.download()) total += p;  // table order, as on the CPU
  return total;
}

void scale_segments(float* x, const OptimSegment* segments, int count, float s) {
  SegmentTable t(segments, count);
  if (t.total == 0) return;
  ZAYA_LAUNCH(scale_kernel, blocks_for(long(t.total), kThreads), kThreads, 0, 0)
  (x, t.begin, t.first, t.count, t.total, s);
  ZAYA_CUDA_LAUNCHED("scale_segments");
}

void adamw_update(float* w, const float* g, float* m, float* v, const OptimSegment* segments,
                  int count, const AdamwConstants& c) {
  SegmentTable t(segments, count);
  if (t.total == 0) return;
  ZAYA_LAUNCH(adamw_kernel, blocks_for(long(t.total), kThreads), kThreads, 0, 0)
  (w, g, m, v, t.begin, t.first, t.keep, t.count, t.total, c);
  ZAYA_CUDA_LAUNCHED("adamw_update");
}

void muon_momentum(float* buf, float* d, const float* g, const OptimSegment* segments, int count,
                   float beta, float one_minus_beta, bool nesterov) {
  SegmentTable t(segments, count);
  if (t.total == 0) return;
  ZAYA_LAUNCH(muon_momentum_kernel, blocks_for(long(t.total), kThreads), kThreads, 0, 0)
  (buf, d, g, t.begin, t.first, t.count, t.total, beta, one_minus_beta, nesterov);
  ZAYA_CUDA_LAUNCHED("muon_momentum");
}

void decay_and_step(float* w, const float* d, const OptimSegment* segments, int count) {
  SegmentTable t(segments, count);
  if (t.total == 0) return;
  ZAYA_LAUNCH(decay_and_step_kernel, blocks_for(long(t.total), kThreads), kThreads, 0, 0)
  (w, d, t.begin, t.first, t.keep, t.step, t.count, t.total);
  ZAYA_CUDA_LAUNCHED("decay_and_step");
}

}  // namespace zaya::cuda
