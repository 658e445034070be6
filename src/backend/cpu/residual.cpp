#include "backend/cpu/residual.h"

#include <cstddef>
#include <vector>

#include "backend/cpu/norm.h"
#include "backend/cpu/parallel_threshold.h"
#include "backend/cpu/reduce.h"

ZAYA_CPU_TARGET_BEGIN
namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

void residual_merge_forward(float* out, const float* h, const float* hb, const float* hs,
                            const float* r, const float* rb, const float* rs, int n, int c) {
  for_ranges(n, worth_threads(int64_t(n) * c), [&](int64_t first, int64_t last) {
    for (int i = int(first); i < int(last); ++i) {
      const size_t o = size_t(i) * c;
      // The test on r outside the loop over j, which is then vectorised.
      if (r) {
        for (int j = 0; j < c; ++j)
          out[o + j] = (h[o + j] + hb[j]) * hs[j] + (r[o + j] + rb[j]) * rs[j];
      } else {
        for (int j = 0; j < c; ++j) out[o + j] = (h[o + j] + hb[j]) * hs[j];
      }
    }
  });
}

void residual_merge_backward(float* dh, float* dhb, float* dhs, float* dr, float* drb, float* drs,
                             const float* dout, const float* h, const float* hb, const float* hs,
                             const float* r, const float* rb, const float* rs, int n, int c) {
  for_ranges(n, worth_threads(int64_t(n) * c), [&](int64_t first, int64_t last) {
    for (int i = int(first); i < int(last); ++i) {
      const size_t o = size_t(i) * c;
      for (int j = 0; j < c; ++j) {
        if (dh) dh[o + j] += dout[o + j] * hs[j];
        if (dr && r) dr[o + j] += dout[o + j] * rs[j];
      }
    }
  });
  // Per-channel parameter gradients: dhb = hs ⊙ Σ dout, dhs = Σ dout ⊙ (h + hb), same for r.
  std::vector<double> sum(c), dot(c);
  column_dot(sum.data(), dout, nullptr, nullptr, nullptr, n, c);
  column_dot(dot.data(), dout, h, hb, nullptr, n, c);
  for (int j = 0; j < c; ++j) {
    if (dhs) dhs[j] += float(dot[j]);
    if (dhb) dhb[j] += float(sum[j] * hs[j]);
  }
  if (r) {
    column_dot(dot.data(), dout, r, rb, nullptr, n, c);
    for (int j = 0; j < c; ++j) {
      if (drs) drs[j] += float(dot[j]);
      if (drb) drb[j] += float(sum[j] * rs[j]);
    }
  }
}

void merge_rmsnorm_forward(float* r_out, float* x_out, float* rstd, const float* h, const float* hb,
                           const float* hs, const float* r, const float* rb, const float* rs,
                           const float* w, int n, int c, float eps) {
  residual_merge_forward(r_out, h, hb, hs, r, rb, rs, n, c);
  rmsnorm_forward(x_out, rstd, r_out, w, n, c, eps);
}

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
ZAYA_CPU_TARGET_END
