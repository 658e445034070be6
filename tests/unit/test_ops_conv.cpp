// CCA's two causal convolutions (backend/cpu/conv.h): forwards against the documented formulas
// computed directly in double, and every backward (input, weight, bias) against central
// differences.
//
// Both convolutions are linear in each argument separately, so the central difference is exact up
// to fp32 rounding for any step: eps = 0.1, rtol 1e-3, atol 1e-4 · max|grad|. Sequence lengths
// include 1, 2 and 3 (the edges where the two padding steps matter) and random longer ones.
#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/conv.h"
#include "gradcheck.h"

namespace zaya::cpu {
namespace {

using test::check_gradient;
using test::GradCheckOptions;
using test::LinearOptions;
using test::random_uniform;
using test::weighted_sum;

std::string Describe(int batch, int seq, int channels) {
  return "batch=" + std::to_string(batch) + " seq=" + std::to_string(seq) +
         " channels=" + std::to_string(channels);
}

void CheckDepthwise(int batch, int seq, int C, std::mt19937& rng) {
  SCOPED_TRACE(Describe(batch, seq, C));
  std::vector<float> u = random_uniform(size_t(batch) * seq * C, rng);
  std::vector<float> w = random_uniform(size_t(C) * 2, rng);
  std::vector<float> bias = random_uniform(C, rng);
  const std::vector<float> R = random_uniform(size_t(batch) * (seq + 1) * C, rng);
  std::vector<float> a(R.size());
  auto loss = [&] {
    depthwise_conv_forward(a.data(), u.data(), w.data(), bias.data(), batch, seq, C);
    return weighted_sum(a, R);
  };
  loss();
  // a[b, j, c] = w[c,0]·ũ[j-2] + w[c,1]·ũ[j-1] + bias[c], j = 0..seq, zero padding.
  auto U = [&](int b, int t, int c) {
    return t < 0 ? 0.0 : double(u[(size_t(b) * seq + t) * C + c]);
  };
  for (int b = 0; b < batch; ++b)
    for (int j = 0; j <= seq; ++j)
      for (int c = 0; c < C; ++c) {
        const double e = w[2 * c] * U(b, j - 2, c) + w[2 * c + 1] * U(b, j - 1, c) + bias[c];
        EXPECT_NEAR(a[(size_t(b) * (seq + 1) + j) * C + c], e, 1e-5) << "j=" << j << " c=" << c;
      }
  for (int b = 0; b < batch; ++b)  // a[0] = bias exactly
    for (int c = 0; c < C; ++c) EXPECT_EQ(a[size_t(b) * (seq + 1) * C + c], bias[c]);

  std::vector<float> du(u.size(), 0.0f), dw(w.size(), 0.0f), dbias(C, 0.0f);
  depthwise_conv_backward(du.data(), dw.data(), dbias.data(), R.data(), u.data(), w.data(), batch,
                          seq, C);
  const GradCheckOptions opt = LinearOptions();
  EXPECT_TRUE(check_gradient("depthwise du", u, du, loss, opt));
  EXPECT_TRUE(check_gradient("depthwise dw", w, dw, loss, opt));
  EXPECT_TRUE(check_gradient("depthwise dbias", bias, dbias, loss, opt));
}

TEST(OpsConv, DepthwiseForwardAndGradient) {
  std::mt19937 rng(71);
  for (int seq : {1, 2, 3}) CheckDepthwise(2, seq, 3, rng);
  CheckDepthwise(1, 1, 1, rng);
  std::uniform_int_distribution<int> len(4, 20), ch(1, 9), bt(1, 3);
  for (int rep = 0; rep < 3; ++rep) CheckDepthwise(bt(rng), len(rng), ch(rng), rng);
}

void CheckGrouped(int batch, int seq, int C, int G, std::mt19937& rng) {
  SCOPED_TRACE(Describe(batch, seq, C) + " group_size=" + std::to_string(G));
  std::vector<float> a = random_uniform(size_t(batch) * (seq + 1) * C, rng);  // seq + 1 steps
  std::vector<float> w = random_uniform(size_t(C) * G * 2, rng);
  std::vector<float> bias = random_uniform(C, rng);
  const std::vector<float> R = random_uniform(size_t(batch) * seq * C, rng);
  std::vector<float> z(R.size());
  auto loss = [&] {
    grouped_conv_forward(z.data(), a.data(), w.data(), bias.data(), batch, seq, C, G);
    return weighted_sum(z, R);
  };
  loss();
  // z[b, t, c] = Σ_{c' in group(c)} w[c, c'-g0, 0]·a[t, c'] + w[c, c'-g0, 1]·a[t+1, c'] + bias[c],
  // with w laid out [C, G, 2] (PyTorch Conv1d).
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < seq; ++t)
      for (int c = 0; c < C; ++c) {
        const int g0 = c / G * G;
        double e = bias[c];
        for (int i = 0; i < G; ++i) {
          const double a0 = a[(size_t(b) * (seq + 1) + t) * C + g0 + i];
          const double a1 = a[(size_t(b) * (seq + 1) + t + 1) * C + g0 + i];
          e += w[(size_t(c) * G + i) * 2] * a0 + w[(size_t(c) * G + i) * 2 + 1] * a1;
        }
        EXPECT_NEAR(z[(size_t(b) * seq + t) * C + c], e, 1e-5) << "t=" << t << " c=" << c;
      }

  std::vector<float> da(a.size(), 0.0f), dw(w.size(), 0.0f), dbias(C, 0.0f);
  grouped_conv_backward(da.data(), dw.data(), dbias.data(), R.data(), a.data(), w.data(), batch,
                        seq, C, G);
  const GradCheckOptions opt = LinearOptions();
  EXPECT_TRUE(check_gradient("grouped da", a, da, loss, opt));
  EXPECT_TRUE(check_gradient("grouped dw", w, dw, loss, opt));
  EXPECT_TRUE(check_gradient("grouped dbias", bias, dbias, loss, opt));
}

TEST(OpsConv, GroupedForwardAndGradient) {
  std::mt19937 rng(72);
  for (int seq : {1, 2, 3}) CheckGrouped(2, seq, 6, 3, rng);
  CheckGrouped(1, 1, 1, 1, rng);
  CheckGrouped(1, 3, 4, 4, rng);  // a single group
  CheckGrouped(2, 5, 4, 1, rng);  // group size 1 (depthwise)
  std::uniform_int_distribution<int> len(4, 20), groups(1, 4), gsize(1, 5), bt(1, 3);
  for (int rep = 0; rep < 3; ++rep) {
    const int G = gsize(rng);
    CheckGrouped(bt(rng), len(rng), G * groups(rng), G, rng);
  }
}

TEST(OpsConv, ChainedConvsAreCausal) {
  // u → depthwise → grouped: z[t] must not depend on u[t'] for t' > t (and does depend on u[t]).
  std::mt19937 rng(73);
  const int seq = 6, C = 4, G = 2;
  std::vector<float> u = random_uniform(size_t(seq) * C, rng);
  const std::vector<float> w1 = random_uniform(size_t(C) * 2, rng), b1 = random_uniform(C, rng);
  const std::vector<float> w2 = random_uniform(size_t(C) * G * 2, rng), b2 = random_uniform(C, rng);
  std::vector<float> a(size_t(seq + 1) * C), z(size_t(seq) * C);
  auto run = [&] {
    depthwise_conv_forward(a.data(), u.data(), w1.data(), b1.data(), 1, seq, C);
    grouped_conv_forward(z.data(), a.data(), w2.data(), b2.data(), 1, seq, C, G);
    return z;
  };
  const std::vector<float> z0 = run();
  for (int tp = 0; tp < seq; ++tp) {
    for (int c = 0; c < C; ++c) u[size_t(tp) * C + c] += 1.0f;
    const std::vector<float> z1 = run();
    for (int c = 0; c < C; ++c) u[size_t(tp) * C + c] -= 1.0f;
    for (int t = 0; t < tp; ++t)
      for (int c = 0; c < C; ++c) EXPECT_EQ(z1[size_t(t) * C + c], z0[size_t(t) * C + c]);
    bool changed = false;
    for (int c = 0; c < C; ++c) changed |= z1[size_t(tp) * C + c] != z0[size_t(tp) * C + c];
    EXPECT_TRUE(changed) << "z[" << tp << "] ignores u[" << tp << "]";
  }
}

}  // namespace
}  // namespace zaya::cpu
