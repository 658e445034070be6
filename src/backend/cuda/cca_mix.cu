// CCA's steps between the convolutions and the normalisation (model/cca.cpp, whole sequences):
// the q-k-mean skip from the pre-conv projections and the value shift. The fused projection's row
// is [q0 (nq·d) | k0 (nk·d) | v_cur (nk·d/2) | v_prev (nk·d/2)]; qk1 is [q1 | k1].
#include "backend/cuda/ops.h"
#include "backend/cuda/reduce.cuh"

namespace zaya::cuda {

namespace {

struct Mix {
  int nq, nk, d, seq;
  __device__ int g() const { return nq / nk; }
  __device__ int dq() const { return nq * d; }
  __device__ int dk() const { return nk * d; }
  __device__ int c() const { return dq() + dk(); }
  __device__ int p() const { return c() + dk(); }
};

// One thread per element of [q1 | k1 | v] of a token.
__global__ void cca_mix_forward_kernel(float* qk1, float* v, const float* proj, long total, Mix m) {
  const long k = long(blockIdx.x) * blockDim.x + threadIdx.x;
  const int width = m.c() + m.dk();
  if (k >= total) return;
  const long t = k / width;
  const int e = int(k % width);
  const float* q0 = proj + size_t(t) * m.p();
  const float* k0 = q0 + m.dq();
  if (e < m.dq()) {  // q1[h] += (q0[h] + k0[j(h)]) / 2
    const int h = e / m.d, i = e % m.d;
    qk1[size_t(t) * m.c() + e] += 0.5f * (q0[e] + k0[(h / m.g()) * m.d + i]);
  } else if (e < m.c()) {  // k1[j] += mean_{h in j}(q0[h]) / 2 + k0[j] / 2
    const int j = (e - m.dq()) / m.d, i = (e - m.dq()) % m.d;
    float mean = 0.0f;
    for (int h = j * m.g(); h < (j + 1) * m.g(); ++h) mean += q0[h * m.d + i];
    mean /= float(m.g());
    qk1[size_t(t) * m.c() + e] += 0.5f * mean + 0.5f * k0[j * m.d + i];
  } else {  // v = [v_cur(t) ‖ v_prev_raw(t − 1)], zero at a sequence's first position
    const int c = e - m.c(), half = m.dk() / 2;
    float value;
    if (c < half)
      value = q0[m.c() + c];
    else
      value = t % m.seq == 0 ? 0.0f : proj[size_t(t - 1) * m.p() + m.c() + c];
    v[size_t(t) * m.dk() + c] = value;
  }
}

// One thread per element of a token's dproj (overwritten).
__global__ void cca_mix_backward_kernel(float* dproj, const float* dqk1, const float* du,
                                        const float* dv, long total, Mix m) {
  const long k = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= total) return;
  const long t = k / m.p();
  const int e = int(k % m.p());
  const float* dq1 = dqk1 + size_t(t) * m.c();
  const float* dk1 = dq1 + m.dq();
  const float* dut = du + size_t(t) * m.c();
  float out;
  if (e < m.dq()) {
    const int h = e / m.d, i = e % m.d;
    out = dut[e] + 0.5f * dq1[e] + 0.5f * (1.0f / float(m.g())) * dk1[(h / m.g()) * m.d + i];
  } else if (e < m.c()) {
    const int j = (e - m.dq()) / m.d, i = (e - m.dq()) % m.d;
    float s = 0.0f;
    for (int h = j * m.g(); h < (j + 1) * m.g(); ++h) s += dq1[h * m.d + i];
    out = dut[e] + 0.5f * s + 0.5f * dk1[j * m.d + i];
  } else {
    const int c = e - m.c(), half = m.dk() / 2;
    if (c < half)
      out = dv[size_t(t) * m.dk() + c];
    else  // v_prev of token t + 1 read this row; nobody reads a sequence's last
      out = (t + 1) % m.seq == 0 ? 0.0f : dv[size_t(t + 1) * m.dk() + c];
  }
  dproj[k] = out;
}

}  // namespace

void cca_mix_forward(float* qk1, float* v, const float* proj, int n, int seq, int nq, int nk,
                     int d) {
  const Mix m{nq, nk, d, seq};
  const long total = long(n) * (long(nq + nk) * d + long(nk) * d);
  if (total == 0) return;
  ZAYA_LAUNCH(cca_mix_forward_kernel, blocks_for(total, 256), 256, 0, 0)(qk1, v, proj, total, m);
  ZAYA_CUDA_LAUNCHED("cca_mix_forward");
}

void cca_mix_backward(float* dproj, const float* dqk1, const float* du, const float* dv, int n,
                      int seq, int nq, int nk, int d) {
  const Mix m{nq, nk, d, seq};
  const long total = long(n) * (long(nq + 2 * nk) * d);
  if (total == 0) return;
  ZAYA_LAUNCH(cca_mix_backward_kernel, blocks_for(total, 256), 256, 0, 0)
  (dproj, dqk1, du, dv, total, m);
  ZAYA_CUDA_LAUNCHED("cca_mix_backward");
}

}  // namespace zaya::cuda
