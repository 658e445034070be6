// AdamW over many tensors in one launch (the optimizer's AdamW group): each thread updates one
// element and finds its tensor by binary search over the segments' starts, so the per-tensor
// weight decay needs no launch per tensor. Element-wise, so no order questions arise.
#include <vector>

#include "backend/cuda/device.h"
#include "backend/cuda/ops.h"
#include "backend/cuda/reduce.cuh"

namespace zaya::cuda {

namespace {

__global__ void adamw_kernel(float* w, const float* g, float* m, float* v, const int64_t* begins,
                             const float* keeps, int segments, int64_t total, AdamwStep s) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  int lo = 0, hi = segments - 1;  // the last segment whose begin is <= i
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (begins[mid] <= i)
      lo = mid;
    else
      hi = mid - 1;
  }
  m[i] = s.beta1 * m[i] + s.one_minus_beta1 * g[i];
  v[i] = s.beta2 * v[i] + s.one_minus_beta2 * g[i] * g[i];
  w[i] = w[i] * keeps[lo] - s.step_size * m[i] / (sqrtf(v[i]) * s.inv_sqrt_bc2 + s.eps);
}

}  // namespace

void adamw_multi_tensor(float* w, const float* g, float* m, float* v,
                        const std::vector<AdamwSegment>& segments, const AdamwStep& step) {
  if (segments.empty()) return;
  // Segments are back to back from element 0: element i belongs to the last one starting at or
  // before it.
  std::vector<int64_t> begins;
  std::vector<float> keeps;
  int64_t total = 0;
  for (const AdamwSegment& s : segments) {
    ZAYA_CHECK(s.begin == total, "adamw_multi_tensor: segment at ", s.begin, " does not follow ",
               "the previous one, which ends at ", total);
    begins.push_back(s.begin);
    keeps.push_back(s.keep);
    total += s.n;
  }
  if (total == 0) return;
  DeviceBuffer<int64_t> dbegins(begins);
  DeviceBuffer<float> dkeeps(keeps);
  adamw_kernel<<<blocks_for(long(total), 256), 256>>>(w, g, m, v, dbegins.get(), dkeeps.get(),
                                                      int(segments.size()), total, step);
  ZAYA_CUDA_LAUNCHED("adamw_multi_tensor");
}

}  // namespace zaya::cuda
