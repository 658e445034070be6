#include "backend/cpu/residual.h"
#include <cstddef>

namespace zaya::cpu {

void residual_merge_forward(float* out, const float* h, const float* hb, const float* hs,
                            const float* r, const float* rb, const float* rs, int n, int c) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < n; ++i) {
    const size_t o = size_t(i) * c;
    for (int j = 0; j < c; ++j) {
      float v = (h[o + j] + hb[j]) * hs[j];
      if (r) v += (r[o + j] + rb[j]) * rs[j];
      out[o + j] = v;
    }
  }
}

void residual_merge_backward(float* dh, float* dhb, float* dhs, float* dr, float* drb, float* drs,
                             const float* dout, const float* h, const float* hb, const float* hs,
                             const float* r, const float* rb, const float* rs, int n, int c) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < n; ++i) {
    const size_t o = size_t(i) * c;
    for (int j = 0; j < c; ++j) {
      if (dh) dh[o + j] += dout[o + j] * hs[j];
      if (dr && r) dr[o + j] += dout[o + j] * rs[j];
    }
  }
  // Per-channel parameter gradients, summed over rows in a fixed order.
#pragma omp parallel for schedule(static)
  for (int j = 0; j < c; ++j) {
    double shs = 0, shb = 0, srs = 0, srb = 0;
    for (int i = 0; i < n; ++i) {
      const size_t o = size_t(i) * c + j;
      shs += double(dout[o]) * (h[o] + hb[j]);
      shb += double(dout[o]) * hs[j];
      if (r) {
        srs += double(dout[o]) * (r[o] + rb[j]);
        srb += double(dout[o]) * rs[j];
      }
    }
    if (dhs) dhs[j] += float(shs);
    if (dhb) dhb[j] += float(shb);
    if (r && drs) drs[j] += float(srs);
    if (r && drb) drb[j] += float(srb);
  }
}

}  // namespace zaya::cpu
