// Partial rotary embedding (backend/cpu/rope.h): forward against the formula computed in double,
// pass-through of dims ≥ rot, and backward (the inverse rotation applied to the gradient) against
// central differences.
//
// The rotation is linear in x, so the central difference is exact up to fp32 rounding: eps = 0.1,
// rtol 1e-3, atol 1e-4 · max|grad|.
#include <cmath>
#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/rope.h"
#include "gradcheck.h"

namespace zaya::cpu {
namespace {

using test::check_gradient;
using test::GradCheckOptions;
using test::random_uniform;
using test::weighted_sum;

struct RopeShape {
  int batch, seq, heads, d, rot;
};

std::string Describe(const RopeShape& s) {
  return "batch=" + std::to_string(s.batch) + " seq=" + std::to_string(s.seq) +
         " heads=" + std::to_string(s.heads) + " d=" + std::to_string(s.d) +
         " rot=" + std::to_string(s.rot);
}

const RopeShape kShapes[] = {{1, 1, 1, 4, 4},  {2, 2, 3, 8, 4},  {1, 3, 2, 6, 2},
                             {2, 3, 2, 10, 8}, {1, 70, 2, 8, 8}, {1, 130, 1, 16, 12}};

TEST(OpsRope, ForwardMatchesFormula) {
  std::mt19937 rng(61);
  const float theta = 10000.0f;
  for (const RopeShape& s : kShapes) {
    SCOPED_TRACE(Describe(s));
    const int half = s.rot / 2;
    std::vector<float> cos_t(size_t(s.seq) * half), sin_t(size_t(s.seq) * half);
    rope_tables(cos_t.data(), sin_t.data(), s.seq, s.rot, theta);
    const std::vector<float> x0 = random_uniform(size_t(s.batch) * s.seq * s.heads * s.d, rng);
    std::vector<float> x = x0;
    rope_apply(x.data(), cos_t.data(), sin_t.data(), s.batch, s.seq, s.heads, s.d, s.rot, false);
    for (int b = 0; b < s.batch; ++b)
      for (int t = 0; t < s.seq; ++t)
        for (int h = 0; h < s.heads; ++h) {
          const size_t o = ((size_t(b) * s.seq + t) * s.heads + h) * s.d;
          // fp32 tables: the angle t·inv_freq carries a relative error of a few ulp, so the
          // tolerance grows with the position.
          const double tol = 2e-6 + 5e-7 * t;
          for (int i = 0; i < half; ++i) {
            const double inv_freq = 1.0 / std::pow(double(theta), 2.0 * i / s.rot);
            const double angle = t * inv_freq, c = std::cos(angle), sn = std::sin(angle);
            const double x1 = x0[o + i], x2 = x0[o + i + half];
            EXPECT_NEAR(x[o + i], x1 * c - x2 * sn, tol) << "t=" << t << " i=" << i;
            EXPECT_NEAR(x[o + i + half], x2 * c + x1 * sn, tol) << "t=" << t << " i=" << i;
          }
          for (int i = s.rot; i < s.d; ++i) EXPECT_EQ(x[o + i], x0[o + i]) << "pass-through";
        }
    // Position 0 is the identity.
    for (int h = 0; h < s.heads * s.d; ++h) EXPECT_EQ(x[h], x0[h]);
    // The inverse undoes the forward.
    rope_apply(x.data(), cos_t.data(), sin_t.data(), s.batch, s.seq, s.heads, s.d, s.rot, true);
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], x0[i], 1e-6);
  }
}

TEST(OpsRope, BackwardIsInverseRotationGradient) {
  std::mt19937 rng(62);
  for (const RopeShape& s : kShapes) {
    SCOPED_TRACE(Describe(s));
    const int half = s.rot / 2;
    std::vector<float> cos_t(size_t(s.seq) * half), sin_t(size_t(s.seq) * half);
    rope_tables(cos_t.data(), sin_t.data(), s.seq, s.rot, 10000.0f);
    std::vector<float> x = random_uniform(size_t(s.batch) * s.seq * s.heads * s.d, rng);
    const std::vector<float> R = random_uniform(x.size(), rng);
    std::vector<float> y(x.size());
    auto loss = [&] {
      y = x;
      rope_apply(y.data(), cos_t.data(), sin_t.data(), s.batch, s.seq, s.heads, s.d, s.rot, false);
      return weighted_sum(y, R);
    };
    std::vector<float> dx = R;  // backward: the same call with inverse = true, on dout
    rope_apply(dx.data(), cos_t.data(), sin_t.data(), s.batch, s.seq, s.heads, s.d, s.rot, true);
    GradCheckOptions opt;
    opt.eps = 0.1f;
    opt.tol.rtol = 1e-3;
    opt.tol.atol_scale = 1e-4;
    opt.max_checks = 600;  // the long sequences: a random subset of the elements
    EXPECT_TRUE(check_gradient("rope dx", x, dx, loss, opt));
  }
}

}  // namespace
}  // namespace zaya::cpu
