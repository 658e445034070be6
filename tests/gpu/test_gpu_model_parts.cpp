// GPU ops of the model's own steps against host loops written here from model/cca.cpp's and
// model/moe.cpp's definitions: CCA's q-k-mean skip and value shift (forward and backward), EDA's
// router-state scaling, and the optimizer's sum of squares (fixed order: the same bits twice).
#include <gtest/gtest.h>

#include <vector>

#include "backend/cuda/device.h"
#include "backend/cuda/ops.h"
#include "gpu_test_util.h"

namespace zaya {
namespace {

using cuda::DeviceBuffer;
using test::Floats;
using test::kTolerance;
using test::random_floats;
using test::relative_error;

TEST(GpuOps, CcaQkMeanAndValueShift) {
  for (const int seq : {1, 2, 3, 9}) {
    const int B = 2, n = B * seq, nq = 4, nk = 2, d = 6, g = nq / nk;
    const int Dq = nq * d, Dk = nk * d, C = Dq + Dk, P = C + Dk, half = Dk / 2;
    const Floats proj = random_floats(size_t(n) * P, 100);
    Floats qk1 = random_floats(size_t(n) * C, 101), v(size_t(n) * Dk);
    DeviceBuffer<float> dproj_in(proj), dqk1(qk1), dv_out(v.size());
    for (int t = 0; t < n; ++t) {  // model/cca.cpp steps 3 and 4
      const float* q0 = proj.data() + size_t(t) * P;
      const float* k0 = q0 + Dq;
      float* q1 = qk1.data() + size_t(t) * C;
      float* k1 = q1 + Dq;
      for (int h = 0; h < nq; ++h)
        for (int i = 0; i < d; ++i) q1[h * d + i] += 0.5f * (q0[h * d + i] + k0[(h / g) * d + i]);
      for (int j = 0; j < nk; ++j)
        for (int i = 0; i < d; ++i) {
          float mean = 0.0f;
          for (int h = j * g; h < (j + 1) * g; ++h) mean += q0[h * d + i];
          mean /= float(g);
          k1[j * d + i] += 0.5f * mean + 0.5f * k0[j * d + i];
        }
      for (int c = 0; c < Dk; ++c)
        v[size_t(t) * Dk + c] = c < half       ? proj[size_t(t) * P + C + c]
                                : t % seq == 0 ? 0.0f
                                               : proj[size_t(t - 1) * P + C + c];
    }
    cuda::cca_mix_forward(dqk1.get(), dv_out.get(), dproj_in.get(), n, seq, nq, nk, d);
    EXPECT_LE(relative_error(dqk1.download(), qk1), kTolerance) << "seq " << seq;
    EXPECT_LE(relative_error(dv_out.download(), v), kTolerance) << "seq " << seq;

    const Floats gq = random_floats(size_t(n) * C, 102), du = random_floats(size_t(n) * C, 103),
                 gv = random_floats(size_t(n) * Dk, 104);
    Floats dproj(size_t(n) * P);
    for (int t = 0; t < n; ++t) {
      const float* dq1 = gq.data() + size_t(t) * C;
      const float* dk1 = dq1 + Dq;
      const float* dut = du.data() + size_t(t) * C;
      float* dq0 = dproj.data() + size_t(t) * P;
      float* dk0 = dq0 + Dq;
      for (int h = 0; h < nq; ++h)
        for (int i = 0; i < d; ++i)
          dq0[h * d + i] = dut[h * d + i] + 0.5f * dq1[h * d + i] +
                           0.5f * (1.0f / float(g)) * dk1[(h / g) * d + i];
      for (int j = 0; j < nk; ++j)
        for (int i = 0; i < d; ++i) {
          float s = 0.0f;
          for (int h = j * g; h < (j + 1) * g; ++h) s += dq1[h * d + i];
          dk0[j * d + i] = dut[Dq + j * d + i] + 0.5f * s + 0.5f * dk1[j * d + i];
        }
      for (int c = 0; c < Dk; ++c)
        dk0[Dk + c] = c < half             ? gv[size_t(t) * Dk + c]
                      : (t + 1) % seq == 0 ? 0.0f
                                           : gv[size_t(t + 1) * Dk + c];
    }
    DeviceBuffer<float> dgq(gq), ddu(du), dgv(gv), ddproj(dproj.size());
    cuda::cca_mix_backward(ddproj.get(), dgq.get(), ddu.get(), dgv.get(), n, seq, nq, nk, d);
    EXPECT_LE(relative_error(ddproj.download(), dproj), kTolerance) << "seq " << seq;
  }
}

TEST(GpuOps, EdaRouterStateScaling) {
  for (const int n : {1, 2, 3, 50}) {
    const int R = 8;
    const Floats in = random_floats(size_t(n) * R, 105), scale = random_floats(R, 106);
    Floats state = random_floats(size_t(n) * R, 107);
    DeviceBuffer<float> din_(in), dscale_(scale), dstate(state);
    for (int t = 0; t < n; ++t)
      for (int j = 0; j < R; ++j) state[size_t(t) * R + j] += scale[j] * in[size_t(t) * R + j];
    cuda::eda_forward(dstate.get(), dscale_.get(), din_.get(), n, R);
    EXPECT_LE(relative_error(dstate.download(), state), kTolerance) << n;

    const Floats dst = random_floats(size_t(n) * R, 108);
    Floats gscale = random_floats(R, 109), gin = random_floats(size_t(n) * R, 110);
    DeviceBuffer<float> ddst(dst), dgscale(gscale), dgin(gin);
    for (int j = 0; j < R; ++j) {
      double s = 0.0;
      for (int t = 0; t < n; ++t) s += double(dst[size_t(t) * R + j]) * in[size_t(t) * R + j];
      gscale[j] += float(s);
    }
    for (int t = 0; t < n; ++t)
      for (int j = 0; j < R; ++j) gin[size_t(t) * R + j] += scale[j] * dst[size_t(t) * R + j];
    cuda::eda_backward(dgscale.get(), dgin.get(), ddst.get(), din_.get(), dscale_.get(), n, R);
    EXPECT_LE(relative_error(dgscale.download(), gscale), kTolerance) << n;
    EXPECT_LE(relative_error(dgin.download(), gin), kTolerance) << n;
  }
}

TEST(GpuOps, SumOfSquaresIsExactEnoughAndRepeatsBitwise) {
  for (const long n : {1L, 2L, 3L, 100000L, 3000001L}) {
    const Floats x = random_floats(size_t(n), 111);
    double want = 0.0;
    for (const float v : x) want += double(v) * v;
    DeviceBuffer<float> dx(x);
    const double a = cuda::sum_of_squares(dx.get(), n), b = cuda::sum_of_squares(dx.get(), n);
    EXPECT_NEAR(a, want, 1e-12 * want) << n;  // fp64 either way: only the order differs
    EXPECT_EQ(a, b) << n << ": the same bits on a second call";
    cuda::scale_in_place(dx.get(), n, 0.5f);
    Floats half = x;
    for (float& v : half) v *= 0.5f;
    EXPECT_LE(relative_error(dx.download(), half), 0.0) << n;  // exact: a power of two
  }
}

}  // namespace
}  // namespace zaya
