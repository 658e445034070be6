// Gradient checks for ZAYA1's residual merge (backend/cpu/residual.h):
//   out = (h + hb) ⊙ hs + (r + rb) ⊙ rs.
// The op is linear in each argument separately, so the central difference is exact up to fp32
// rounding for any step: eps = 0.1, rtol 1e-3, atol 1e-4 · max|grad|.
#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/residual.h"
#include "gradcheck.h"

namespace zaya::cpu {
namespace {

using test::check_gradient;
using test::GradCheckOptions;
using test::random_uniform;
using test::weighted_sum;

void CheckResidual(int n, int c, bool with_r, std::mt19937& rng) {
  SCOPED_TRACE("n=" + std::to_string(n) + " c=" + std::to_string(c) + (with_r ? " r" : " no r"));
  std::vector<float> h = random_uniform(size_t(n) * c, rng), r = random_uniform(size_t(n) * c, rng);
  std::vector<float> hb = random_uniform(c, rng), rb = random_uniform(c, rng);
  std::vector<float> hs = random_uniform(c, rng, 0.5f, 1.5f),
                     rs = random_uniform(c, rng, 0.5f, 1.5f);
  const std::vector<float> R = random_uniform(size_t(n) * c, rng);
  std::vector<float> out(size_t(n) * c);
  auto loss = [&] {
    residual_merge_forward(out.data(), h.data(), hb.data(), hs.data(), with_r ? r.data() : nullptr,
                           with_r ? rb.data() : nullptr, with_r ? rs.data() : nullptr, n, c);
    return weighted_sum(out, R);
  };
  // The forward against the formula, in double.
  loss();
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < c; ++j) {
      const size_t o = size_t(i) * c + j;
      double e = (double(h[o]) + hb[j]) * hs[j];
      if (with_r) e += (double(r[o]) + rb[j]) * rs[j];
      EXPECT_NEAR(out[o], e, 1e-5);
    }
  std::vector<float> dh(h.size(), 0.0f), dr(r.size(), 0.0f);
  std::vector<float> dhb(c, 0.0f), dhs(c, 0.0f), drb(c, 0.0f), drs(c, 0.0f);
  if (with_r) {
    residual_merge_backward(dh.data(), dhb.data(), dhs.data(), dr.data(), drb.data(), drs.data(),
                            R.data(), h.data(), hb.data(), hs.data(), r.data(), rb.data(),
                            rs.data(), n, c);
  } else {
    residual_merge_backward(dh.data(), dhb.data(), dhs.data(), nullptr, nullptr, nullptr, R.data(),
                            h.data(), hb.data(), hs.data(), nullptr, nullptr, nullptr, n, c);
  }
  GradCheckOptions opt;
  opt.eps = 0.1f;
  opt.tol.rtol = 1e-3;
  opt.tol.atol_scale = 1e-4;
  EXPECT_TRUE(check_gradient("dh", h, dh, loss, opt));
  EXPECT_TRUE(check_gradient("dhb", hb, dhb, loss, opt));
  EXPECT_TRUE(check_gradient("dhs", hs, dhs, loss, opt));
  if (with_r) {
    EXPECT_TRUE(check_gradient("dr", r, dr, loss, opt));
    EXPECT_TRUE(check_gradient("drb", rb, drb, loss, opt));
    EXPECT_TRUE(check_gradient("drs", rs, drs, loss, opt));
  }
}

TEST(OpsResidual, GradientWithR) {
  std::mt19937 rng(31);
  CheckResidual(1, 1, true, rng);
  CheckResidual(1, 7, true, rng);
  CheckResidual(9, 5, true, rng);
  CheckResidual(4, 16, true, rng);
}

TEST(OpsResidual, GradientWithoutR) {
  std::mt19937 rng(32);
  CheckResidual(1, 3, false, rng);
  CheckResidual(8, 6, false, rng);
}

TEST(OpsResidual, NoRStreamLeavesRGradientsUntouched) {
  // At stage 0 the r term is absent: even given dr/drb/drs buffers, backward must not write them.
  std::mt19937 rng(33);
  const int n = 3, c = 4;
  const std::vector<float> h = random_uniform(size_t(n) * c, rng), hb = random_uniform(c, rng),
                           hs = random_uniform(c, rng), dout = random_uniform(size_t(n) * c, rng);
  std::vector<float> dh(h.size(), 0.0f), dhb(c, 0.0f), dhs(c, 0.0f);
  std::vector<float> dr(h.size(), 2.0f), drb(c, 2.0f), drs(c, 2.0f);
  residual_merge_backward(dh.data(), dhb.data(), dhs.data(), dr.data(), drb.data(), drs.data(),
                          dout.data(), h.data(), hb.data(), hs.data(), nullptr, nullptr, nullptr, n,
                          c);
  for (float g : dr) EXPECT_EQ(g, 2.0f);
  for (float g : drb) EXPECT_EQ(g, 2.0f);
  for (float g : drs) EXPECT_EQ(g, 2.0f);
}

}  // namespace
}  // namespace zaya::cpu
