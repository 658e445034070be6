// GPU ops of the model's own steps against their CPU ops (backend/cpu/model_ops.h), the oracle:
// CCA's q-k-mean skip and value shift (forward and backward) and EDA's router-state scaling; and
// the optimizer's sum of squares against a plain fp64 sum (fixed order: the same bits twice).
#include <gtest/gtest.h>

#include <vector>

#include "backend/cpu/model_ops.h"
#include "backend/cuda/device.h"
#include "backend/cuda/ops.h"
#include "gpu_test_util.h"

namespace zaya {
namespace {

using namespace test;

TEST(GpuOps, CcaQkMeanAndValueShift) {
  for (const int seq : {1, 2, 3, 9}) {
    const int B = 2, n = B * seq, nq = 4, nk = 2, d = 6;
    const int Dq = nq * d, Dk = nk * d, C = Dq + Dk, P = C + Dk;
    const Floats proj = random_floats(size_t(n) * P, 100);
    Floats qk1 = random_floats(size_t(n) * C, 101), v(size_t(n) * Dk);
    DeviceBuffer<float> dproj_in(proj), dqk1(qk1), dv_out(v.size());
    cpu::cca_mix_forward(qk1.data(), v.data(), proj.data(), n, seq, nq, nk, d);
    cuda::cca_mix_forward(dqk1.get(), dv_out.get(), dproj_in.get(), n, seq, nq, nk, d);
    EXPECT_TRUE(elementwise_close(dqk1.download(), qk1, kTolerance)) << "seq " << seq;
    EXPECT_TRUE(elementwise_close(dv_out.download(), v, kTolerance)) << "seq " << seq;

    const Floats gq = random_floats(size_t(n) * C, 102), du = random_floats(size_t(n) * C, 103),
                 gv = random_floats(size_t(n) * Dk, 104);
    Floats dproj(size_t(n) * P);
    cpu::cca_mix_backward(dproj.data(), gq.data(), du.data(), gv.data(), n, seq, nq, nk, d);
    DeviceBuffer<float> dgq(gq), ddu(du), dgv(gv), ddproj(dproj.size());
    cuda::cca_mix_backward(ddproj.get(), dgq.get(), ddu.get(), dgv.get(), n, seq, nq, nk, d);
    EXPECT_TRUE(elementwise_close(ddproj.download(), dproj, kTolerance)) << "seq " << seq;
  }
}

TEST(GpuOps, EdaRouterStateScaling) {
  for (const int n : {1, 2, 3, 50}) {
    const int R = 8;
    const Floats in = random_floats(size_t(n) * R, 105), scale = random_floats(R, 106);
    Floats state = random_floats(size_t(n) * R, 107);
    DeviceBuffer<float> din_(in), dscale_(scale), dstate(state);
    cpu::eda_forward(state.data(), scale.data(), in.data(), n, R);
    cuda::eda_forward(dstate.get(), dscale_.get(), din_.get(), n, R);
    EXPECT_TRUE(elementwise_close(dstate.download(), state, kTolerance)) << n;

    const Floats dst = random_floats(size_t(n) * R, 108);
    Floats gscale = random_floats(R, 109), gin = random_floats(size_t(n) * R, 110);
    DeviceBuffer<float> ddst(dst), dgscale(gscale), dgin(gin);
    cpu::eda_backward(gscale.data(), gin.data(), dst.data(), in.data(), scale.data(), n, R);
    cuda::eda_backward(dgscale.get(), dgin.get(), ddst.get(), din_.get(), dscale_.get(), n, R);
    EXPECT_TRUE(elementwise_close(dgscale.download(), gscale, kTolerance)) << n;
    EXPECT_TRUE(elementwise_close(dgin.download(), gin, kTolerance)) << n;
  }
}

// The gradient norm's sum over a chunk table (chunks of the lengths the optimizer uses, 1, 2, 3
// and ones longer than a block's threads), and the clip's scaling of the same table.
TEST(GpuOps, SumOfSquaresChunksIsExactEnoughAndRepeatsBitwise) {
  const Floats x = random_floats(3000001, 111);
  const std::vector<OptimSegment> chunks = {{0, 1},      {5, 2},          {9, 3},
                                            {20, 65536}, {70000, 100000}, {200000, 2800001}};
  double want = 0.0;
  for (const OptimSegment& c : chunks)
    for (int64_t i = c.begin; i < c.begin + c.n; ++i) want += double(x[size_t(i)]) * x[size_t(i)];
  DeviceBuffer<float> dx(x);
  const int n = int(chunks.size());
  const double a = cuda::sum_of_squares_chunks(dx.get(), chunks.data(), n);
  const double b = cuda::sum_of_squares_chunks(dx.get(), chunks.data(), n);
  EXPECT_NEAR(a, want, 1e-12 * want);  // fp64 either way: only the order differs
  EXPECT_EQ(a, b) << "the same bits on a second call";
  cuda::scale_segments(dx.get(), chunks.data(), n, 0.5f);
  Floats half = x;
  for (const OptimSegment& c : chunks)
    for (int64_t i = c.begin; i < c.begin + c.n; ++i) half[size_t(i)] *= 0.5f;
  EXPECT_TRUE(elementwise_close(dx.download(), half,
                                Tolerance{}));  // exact: a power of two, and only the chunks
}

}  // namespace
}  // namespace zaya
