#include "backend/cuda/ops.h"
#include "backend/cuda/reduce.cuh"

namespace zaya::cuda {

namespace {

__global__ void residual_merge_forward_kernel(float* out, const float* h, const float* hb,
                                              const float* hs, const float* r, const float* rb,
                                              const float* rs, long total, int c) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int j = int(i % c);
  float v = (h[i] + hb[j]) * hs[j];
  if (r) v += (r[i] + rb[j]) * rs[j];
  out[i] = v;
}

__global__ void residual_merge_backward_rows_kernel(float* dh, float* dr, const float* dout,
                                                    const float* hs, const float* rs, long total,
                                                    int c) {
  const long i = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int j = int(i % c);
  if (dh) dh[i] += dout[i] * hs[j];
  if (dr) dr[i] += dout[i] * rs[j];
}

// The four per-channel gradients dhb = hs ⊙ Σ dout, dhs = Σ dout ⊙ (h + hb), and the same for r:
// fp64 sums over the rows by column_sums (reduce.cuh).
__global__ void residual_merge_backward_channels_kernel(float* dhb, float* dhs, float* drb,
                                                        float* drs, const float* dout,
                                                        const float* h, const float* hb,
                                                        const float* hs, const float* r,
                                                        const float* rb, const float* rs, int n,
                                                        int c) {
  const long j = tile_column();
  double sums[3];  // Σ dout, Σ dout·(h + hb), Σ dout·(r + rb)
  if (!column_sums(sums, n, j < c, [&](long i, auto& acc) {
        const size_t o = size_t(i) * c + j;
        const double d = dout[o];
        acc[0] += d;
        acc[1] += d * (h[o] + hb[j]);
        if (r) acc[2] += d * (r[o] + rb[j]);
      }))
    return;
  const double sum = sums[0], hdot = sums[1], rdot = sums[2];
  if (dhs) dhs[j] += float(hdot);
  if (dhb) dhb[j] += float(sum * hs[j]);
  if (r && drs) drs[j] += float(rdot);
  if (r && drb) drb[j] += float(sum * rs[j]);
}

// One block per row: the merge as residual_merge_forward_kernel, then the RMSNorm of the merged
// row as rmsnorm_forward_kernel (fp64 sum of squares over the same thread shares and tree), each
// thread reading back the elements it wrote.
__global__ void merge_rmsnorm_forward_kernel(float* r_out, float* x_out, float* rstd,
                                             const float* h, const float* hb, const float* hs,
                                             const float* r, const float* rb, const float* rs,
                                             const float* w, int c, float eps) {
  __shared__ double shared[kRowThreads];
  const size_t row = size_t(blockIdx.x) * c;
  double ss = 0.0;
  for (int j = threadIdx.x; j < c; j += kRowThreads) {
    const size_t i = row + j;
    float v = (h[i] + hb[j]) * hs[j];
    if (r) v += (r[i] + rb[j]) * rs[j];
    r_out[i] = v;
    ss += double(v) * v;
  }
  ss = block_sum(ss, shared);
  const float inv = float(1.0 / sqrt(ss / c + eps));
  for (int j = threadIdx.x; j < c; j += kRowThreads) x_out[row + j] = r_out[row + j] * inv * w[j];
  if (rstd && threadIdx.x == 0) rstd[blockIdx.x] = inv;
}

}  // namespace

void merge_rmsnorm_forward(float* r_out, float* x_out, float* rstd, const float* h, const float* hb,
                           const float* hs, const float* r, const float* rb, const float* rs,
                           const float* w, int n, int c, float eps) {
  if (n == 0) return;
  ZAYA_LAUNCH(merge_rmsnorm_forward_kernel, n, kRowThreads, 0, 0)
  (r_out, x_out, rstd, h, hb, hs, r, rb, rs, w, c, eps);
  ZAYA_CUDA_LAUNCHED("merge_rmsnorm_forward");
}

void residual_merge_forward(float* out, const float* h, const float* hb, const float* hs,
                            const float* r, const float* rb, const float* rs, int n, int c) {
  const long total = long(n) * c;
  if (total == 0) return;
  ZAYA_LAUNCH(residual_merge_forward_kernel, blocks_for(total, 256), 256, 0, 0)
  (out, h, hb, hs, r, rb, rs, total, c);
  ZAYA_CUDA_LAUNCHED("residual_merge_forward");
}

void residual_merge_backward(float* dh, float* dhb, float* dhs, float* dr, float* drb, float* drs,
                             const float* dout, const float* h, const float* hb, const float* hs,
                             const float* r, const float* rb, const float* rs, int n, int c) {
  const long total = long(n) * c;
  if (total == 0) return;
  ZAYA_LAUNCH(residual_merge_backward_rows_kernel, blocks_for(total, 256), 256, 0, 0)
  (dh, r ? dr : nullptr, dout, hs, rs, total, c);
  ZAYA_CUDA_LAUNCHED("residual_merge_backward (rows)");
  ZAYA_LAUNCH(residual_merge_backward_channels_kernel, blocks_for(c, kColumnTile), kColumnThreads,
              0, 0)
  (dhb, dhs, drb, drs, dout, h, hb, hs, r, rb, rs, n, c);
  ZAYA_CUDA_LAUNCHED("residual_merge_backward (channels)");
}

}  // namespace zaya::cuda
