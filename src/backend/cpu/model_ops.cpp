#include "backend/cpu/model_ops.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/parallel_threshold.h"
#include "core/error.h"

ZAYA_CPU_TARGET_BEGIN
namespace zaya::cpu {
ZAYA_CPU_PATH_BEGIN

void copy_rows(float* dst, size_t dst_stride, const float* src, size_t src_stride, int rows,
               int width) {
  for_ranges(rows, worth_threads(int64_t(rows) * width), [&](int64_t first, int64_t last) {
    for (int r = int(first); r < int(last); ++r)
      std::memcpy(dst + size_t(r) * dst_stride, src + size_t(r) * src_stride,
                  sizeof(float) * width);
  });
}

void fill(float* dst, size_t n, float value) {
  for (size_t i = 0; i < n; ++i) dst[i] = value;
}

void add_into(float* dst, const float* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] += src[i];
}

void embedding_forward(float* out, const float* table, const int32_t* tokens, int n, int e) {
  for_ranges(n, worth_threads(int64_t(n) * e), [&](int64_t first, int64_t last) {
    for (int t = int(first); t < int(last); ++t)
      std::memcpy(out + size_t(t) * e, table + size_t(tokens[t]) * e, sizeof(float) * e);
  });
}

void embedding_backward(float* dtable, const float* dout, const int32_t* tokens, int n, int e,
                        int vocab) {
  ZAYA_CHECK(vocab > 0, "embedding_backward: a table of ", vocab, " rows");
  // Rows accumulated in token order (deterministic); the threads take column ranges, so every
  // element sees the same additions in the same order at any thread count.
  constexpr int kCols = 64;
  const int blocks = (e + kCols - 1) / kCols;
#pragma omp parallel for schedule(static)
  for (int cb = 0; cb < blocks; ++cb) {
    const int j0 = cb * kCols, j1 = std::min(e, j0 + kCols);
    for (int t = 0; t < n; ++t) {
      float* row = dtable + size_t(tokens[t]) * e;
      const float* d = dout + size_t(t) * e;
      for (int j = j0; j < j1; ++j) row[j] += d[j];
    }
  }
}

void cca_mix_forward(float* qk1, float* v, const float* proj, int n, int seq, int nq, int nk,
                     int d) {
  const int g = nq / nk, Dq = nq * d, Dk = nk * d, C = Dq + Dk, P = C + Dk, half = Dk / 2;
  for_ranges(n, worth_threads(int64_t(n) * P), [&](int64_t first, int64_t last) {
    for (int t = int(first); t < int(last); ++t) {
      const float* q0 = proj + size_t(t) * P;
      const float* k0 = q0 + Dq;
      float* q1 = qk1 + size_t(t) * C;
      float* k1 = q1 + Dq;
      for (int h = 0; h < nq; ++h) {
        const float* kj = k0 + (h / g) * d;
        for (int i = 0; i < d; ++i) q1[h * d + i] += 0.5f * (q0[h * d + i] + kj[i]);
      }
      for (int j = 0; j < nk; ++j)
        for (int i = 0; i < d; ++i) {
          float mean = 0.0f;
          for (int h = j * g; h < (j + 1) * g; ++h) mean += q0[h * d + i];
          mean /= float(g);
          k1[j * d + i] += 0.5f * mean + 0.5f * k0[j * d + i];
        }
      float* vt = v + size_t(t) * Dk;
      std::memcpy(vt, k0 + Dk, sizeof(float) * half);
      if (t % seq == 0)
        std::memset(vt + half, 0, sizeof(float) * half);
      else
        std::memcpy(vt + half, proj + size_t(t - 1) * P + C + half, sizeof(float) * half);
    }
  });
}

void cca_mix_backward(float* dproj, const float* dqk1, const float* du, const float* dv, int n,
                      int seq, int nq, int nk, int d) {
  const int g = nq / nk, Dq = nq * d, Dk = nk * d, C = Dq + Dk, P = C + Dk, half = Dk / 2;
  const float inv_g = 1.0f / float(g);
  for_ranges(n, worth_threads(int64_t(n) * P), [&](int64_t first, int64_t last) {
    for (int t = int(first); t < int(last); ++t) {
      float* dq0 = dproj + size_t(t) * P;
      float* dk0 = dq0 + Dq;
      const float* dq1 = dqk1 + size_t(t) * C;
      const float* dk1 = dq1 + Dq;
      const float* dut = du + size_t(t) * C;
      for (int h = 0; h < nq; ++h) {
        const float* dkj = dk1 + (h / g) * d;
        for (int i = 0; i < d; ++i)
          dq0[h * d + i] = dut[h * d + i] + 0.5f * dq1[h * d + i] + 0.5f * inv_g * dkj[i];
      }
      for (int j = 0; j < nk; ++j)
        for (int i = 0; i < d; ++i) {
          float s = 0.0f;
          for (int h = j * g; h < (j + 1) * g; ++h) s += dq1[h * d + i];
          dk0[j * d + i] = dut[Dq + j * d + i] + 0.5f * s + 0.5f * dk1[j * d + i];
        }
      float* dvc = dk0 + Dk;
      float* dvp = dvc + half;
      std::memcpy(dvc, dv + size_t(t) * Dk, sizeof(float) * half);
      // The last row's value is read by nobody.
      if ((t + 1) % seq == 0)
        std::memset(dvp, 0, sizeof(float) * half);
      else
        std::memcpy(dvp, dv + size_t(t + 1) * Dk + half, sizeof(float) * half);
    }
  });
}

void eda_forward(float* state, const float* scale, const float* state_in, int n, int r) {
  for_ranges(n, worth_threads(int64_t(n) * r), [&](int64_t first, int64_t last) {
    for (int t = int(first); t < int(last); ++t)
      for (int j = 0; j < r; ++j)
        state[size_t(t) * r + j] += scale[j] * state_in[size_t(t) * r + j];
  });
}

void eda_backward(float* dscale, float* dstate_in, const float* dstate, const float* state_in,
                  const float* scale, int n, int r) {
  // r_l = r + γ ⊙ r_{l-1}: dγ = Σ dr_l ⊙ r_{l-1}, dr_{l-1} += γ ⊙ dr_l.
  if (dscale) {
#pragma omp parallel for schedule(static)
    for (int j = 0; j < r; ++j) {
      double s = 0.0;
      for (int t = 0; t < n; ++t)
        s += double(dstate[size_t(t) * r + j]) * state_in[size_t(t) * r + j];
      dscale[j] += float(s);
    }
  }
  if (dstate_in) {
#pragma omp parallel for schedule(static)
    for (int t = 0; t < n; ++t)
      for (int j = 0; j < r; ++j)
        dstate_in[size_t(t) * r + j] += scale[j] * dstate[size_t(t) * r + j];
  }
}

void top1_routes(int32_t* route, const float* probs, const float* biases, int n, int routes) {
  for (int t = 0; t < n; ++t) route[t] = top1_route(probs + size_t(t) * routes, biases, routes);
}

void sort_by_route(int32_t* order, int32_t* offsets, const int32_t* route, int n, int routes) {
  std::fill(offsets, offsets + routes + 1, 0);
  for (int t = 0; t < n; ++t) ++offsets[route[t] + 1];
  for (int e = 0; e < routes; ++e) offsets[e + 1] += offsets[e];
  std::vector<int32_t> fill(offsets, offsets + routes);
  for (int t = 0; t < n; ++t) order[fill[size_t(route[t])]++] = t;
}

void gather_rows(float* out, const float* in, const int32_t* order, int rows, int width) {
  for_ranges(rows, worth_threads(int64_t(rows) * width), [&](int64_t first, int64_t last) {
    for (int i = int(first); i < int(last); ++i)
      std::memcpy(out + size_t(i) * width, in + size_t(order[i]) * width, sizeof(float) * width);
  });
}

void scatter_add_rows(float* out, const float* in, const int32_t* order, int rows, int width) {
  for_ranges(rows, worth_threads(int64_t(rows) * width), [&](int64_t first, int64_t last) {
    for (int i = int(first); i < int(last); ++i) {
      float* d = out + size_t(order[i]) * width;
      for (int j = 0; j < width; ++j) d[j] += in[size_t(i) * width + j];
    }
  });
}

void moe_combine_forward(float* out, const float* y, const float* x, const float* probs,
                         const int32_t* route, const int32_t* order, int n, int n_exp, int e,
                         int routes) {
  for_ranges(n, worth_threads(int64_t(n) * e), [&](int64_t first, int64_t last) {
    for (int i = int(first); i < int(last); ++i) {
      const int t = order[i];
      const float gate = probs[size_t(t) * routes + route[t]];
      // Real expert: gate · expert(x). Skip route (mixture-of-depths): gate · x.
      const float* src = i < n_exp ? y + size_t(i) * e : x + size_t(t) * e;
      float* o = out + size_t(t) * e;
      for (int j = 0; j < e; ++j) o[j] = gate * src[j];
    }
  });
}

void moe_combine_backward(float* dprobs, float* dy, float* dx, const float* dout, const float* y,
                          const float* x, const float* probs, const int32_t* route,
                          const int32_t* order, int n, int n_exp, int e, int routes) {
  // Gate: out = p_route · src, so dp_route = dout · src and dsrc = p_route · dout.
  for_ranges(n, worth_threads(int64_t(n) * e), [&](int64_t first, int64_t last) {
    for (int i = int(first); i < int(last); ++i) {
      const int t = order[i];
      const float gate = probs[size_t(t) * routes + route[t]];
      const float* d = dout + size_t(t) * e;
      const float* src = i < n_exp ? y + size_t(i) * e : x + size_t(t) * e;
      double dot = 0.0;
      for (int j = 0; j < e; ++j) dot += double(d[j]) * src[j];
      dprobs[size_t(t) * routes + route[t]] = float(dot);
      if (i < n_exp) {
        for (int j = 0; j < e; ++j) dy[size_t(i) * e + j] = gate * d[j];
      } else {
        for (int j = 0; j < e; ++j) dx[size_t(t) * e + j] += gate * d[j];
      }
    }
  });
}

ZAYA_CPU_PATH_END
}  // namespace zaya::cpu
ZAYA_CPU_TARGET_END
