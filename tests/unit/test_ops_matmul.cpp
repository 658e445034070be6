// Gradient checks for the dense and grouped matrix products (backend/cpu/matmul.h).
//
// Both products are linear in each argument separately, so the central difference is exact up to
// fp32 rounding for any step: eps = 0.1 keeps that rounding (≈ ulp(out) / 2eps per touched output)
// well below atol. Tolerance: rtol 1e-3, atol 1e-4 · max|grad| (tighter than the default because
// there is no truncation error to allow for).
#include <omp.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/matmul.h"
#include "gradcheck.h"

namespace zaya::cpu {
namespace {

using test::check_gradient;
using test::GradCheckOptions;
using test::LinearOptions;
using test::random_uniform;
using test::weighted_sum;

void CheckMatmul(int n, int k, int m, bool with_bias, std::mt19937& rng) {
  SCOPED_TRACE("n=" + std::to_string(n) + " k=" + std::to_string(k) + " m=" + std::to_string(m) +
               (with_bias ? " bias" : " no bias"));
  std::vector<float> in = random_uniform(size_t(n) * k, rng);
  std::vector<float> w = random_uniform(size_t(m) * k, rng);
  std::vector<float> bias = random_uniform(size_t(m), rng);
  const std::vector<float> R = random_uniform(size_t(n) * m, rng);
  std::vector<float> out(size_t(n) * m);
  auto loss = [&] {
    matmul_forward(out.data(), in.data(), w.data(), with_bias ? bias.data() : nullptr, n, k, m);
    return weighted_sum(out, R);
  };
  std::vector<float> din(in.size(), 0.0f), dw(w.size(), 0.0f), dbias(bias.size(), 0.0f);
  matmul_backward(din.data(), dw.data(), with_bias ? dbias.data() : nullptr, R.data(), in.data(),
                  w.data(), n, k, m);
  const GradCheckOptions opt = LinearOptions();
  EXPECT_TRUE(check_gradient("matmul din", in, din, loss, opt));
  EXPECT_TRUE(check_gradient("matmul dw", w, dw, loss, opt));
  if (with_bias) {
    EXPECT_TRUE(check_gradient("matmul dbias", bias, dbias, loss, opt));
  } else {
    for (float g : dbias) EXPECT_EQ(g, 0.0f);  // dbias == nullptr: nothing written
  }
}

TEST(OpsMatmul, GradientWithBias) {
  std::mt19937 rng(1);
  for (auto [n, k, m] :
       {std::tuple{1, 1, 1}, std::tuple{1, 5, 3}, std::tuple{7, 4, 6}, std::tuple{13, 9, 11}})
    CheckMatmul(n, k, m, true, rng);
  std::uniform_int_distribution<int> dim(1, 12);
  for (int rep = 0; rep < 3; ++rep) CheckMatmul(dim(rng), dim(rng), dim(rng), true, rng);
}

TEST(OpsMatmul, GradientWithoutBias) {
  std::mt19937 rng(2);
  for (auto [n, k, m] : {std::tuple{1, 3, 2}, std::tuple{6, 5, 4}, std::tuple{11, 8, 3}})
    CheckMatmul(n, k, m, false, rng);
}

TEST(OpsMatmul, BackwardAccumulates) {
  std::mt19937 rng(3);
  const int n = 5, k = 4, m = 3;
  const std::vector<float> in = random_uniform(size_t(n) * k, rng);
  const std::vector<float> w = random_uniform(size_t(m) * k, rng);
  const std::vector<float> dout = random_uniform(size_t(n) * m, rng);
  std::vector<float> din0(in.size(), 0.0f), dw0(w.size(), 0.0f), db0(m, 0.0f);
  matmul_backward(din0.data(), dw0.data(), db0.data(), dout.data(), in.data(), w.data(), n, k, m);
  std::vector<float> din1(in.size(), 1.5f), dw1(w.size(), -2.0f), db1(m, 0.25f);
  matmul_backward(din1.data(), dw1.data(), db1.data(), dout.data(), in.data(), w.data(), n, k, m);
  for (size_t i = 0; i < din0.size(); ++i) EXPECT_NEAR(din1[i], din0[i] + 1.5f, 1e-5f);
  for (size_t i = 0; i < dw0.size(); ++i) EXPECT_NEAR(dw1[i], dw0[i] - 2.0f, 1e-5f);
  for (size_t i = 0; i < db0.size(); ++i) EXPECT_NEAR(db1[i], db0[i] + 0.25f, 1e-5f);
}

// offsets has groups + 1 entries; weights[g] is [m, k].
void CheckGrouped(const std::vector<int>& offsets, int k, int m, std::mt19937& rng) {
  const int groups = int(offsets.size()) - 1, n = offsets.back();
  SCOPED_TRACE("groups=" + std::to_string(groups) + " n=" + std::to_string(n));
  std::vector<float> in = random_uniform(size_t(n) * k, rng);
  std::vector<std::vector<float>> w(groups), dw(groups);
  for (int g = 0; g < groups; ++g) {
    w[g] = random_uniform(size_t(m) * k, rng);
    dw[g].assign(size_t(m) * k, 0.0f);
  }
  const std::vector<float> R = random_uniform(size_t(n) * m, rng);
  std::vector<float> out(size_t(n) * m);
  auto loss = [&] {
    std::vector<const float*> wp(groups);
    for (int g = 0; g < groups; ++g) wp[g] = w[g].data();
    grouped_matmul_forward(out.data(), in.data(), wp.data(), offsets.data(), groups, k, m);
    return weighted_sum(out, R);
  };
  std::vector<const float*> wp(groups);
  std::vector<float*> dwp(groups);
  for (int g = 0; g < groups; ++g) {
    wp[g] = w[g].data();
    dwp[g] = dw[g].data();
  }
  std::vector<float> din(in.size(), 0.0f);
  grouped_matmul_backward(din.data(), dwp.data(), R.data(), in.data(), wp.data(), offsets.data(),
                          groups, k, m);
  const GradCheckOptions opt = LinearOptions();
  EXPECT_TRUE(check_gradient("grouped din", in, din, loss, opt));
  for (int g = 0; g < groups; ++g) {
    EXPECT_TRUE(check_gradient("grouped dw[" + std::to_string(g) + "]", w[g], dw[g], loss, opt));
    if (offsets[g + 1] == offsets[g]) {  // an empty group gets an exactly zero gradient
      for (float x : dw[g]) EXPECT_EQ(x, 0.0f);
    }
  }
}

TEST(OpsMatmul, GroupedGradient) {
  std::mt19937 rng(4);
  CheckGrouped({0, 3}, 4, 5, rng);
  CheckGrouped({0, 2, 5, 6}, 3, 4, rng);
  CheckGrouped({0, 0, 3, 3, 7, 8, 8}, 5, 3, rng);  // empty groups first, middle and last
  CheckGrouped({0, 0, 0, 1}, 2, 6, rng);
  CheckGrouped({0, 4, 4}, 6, 2, rng);
  CheckGrouped({0, 64, 64, 193}, 5, 3, rng);  // whole row tiles, and whole tiles plus a partial one
}

TEST(OpsMatmul, GroupedMatchesPerGroupMatmul) {
  std::mt19937 rng(5);
  const std::vector<int> offsets{0, 2, 2, 7};
  const int groups = 3, k = 4, m = 3, n = offsets.back();
  const std::vector<float> in = random_uniform(size_t(n) * k, rng);
  std::vector<std::vector<float>> w(groups);
  std::vector<const float*> wp(groups);
  for (int g = 0; g < groups; ++g) {
    w[g] = random_uniform(size_t(m) * k, rng);
    wp[g] = w[g].data();
  }
  std::vector<float> out(size_t(n) * m, 0.0f);
  grouped_matmul_forward(out.data(), in.data(), wp.data(), offsets.data(), groups, k, m);
  for (int g = 0; g < groups; ++g)
    for (int r = offsets[g]; r < offsets[g + 1]; ++r)
      for (int j = 0; j < m; ++j) {
        double s = 0.0;
        for (int c = 0; c < k; ++c) s += double(in[size_t(r) * k + c]) * w[g][size_t(j) * k + c];
        EXPECT_NEAR(out[size_t(r) * m + j], s, 1e-5);
      }
}

// A row's result must not depend on how many rows its expert segment has: the segment's size
// depends on where later tokens were routed, so this is what keeps the MoE model exactly causal.
// One call per segment failed this (OpenBLAS rounds a row by the call's row count: the SkylakeX
// kernels for segments up to ~18 rows in the forward, the Haswell kernels for every size).
TEST(OpsMatmul, GroupedRowsDoNotDependOnTheSegmentSize) {
  std::mt19937 rng(6);
  const int k = 64, m = 96, most = 150;
  const std::vector<float> in = random_uniform(size_t(most) * k, rng);
  const std::vector<float> w = random_uniform(size_t(m) * k, rng);
  const std::vector<float> dout = random_uniform(size_t(most) * m, rng);
  const float* wp[1] = {w.data()};
  std::vector<float> out_all(size_t(most) * m), din_all(size_t(most) * k, 0.0f);
  const int all[2] = {0, most};
  grouped_matmul_forward(out_all.data(), in.data(), wp, all, 1, k, m);
  grouped_matmul_backward(din_all.data(), nullptr, dout.data(), in.data(), wp, all, 1, k, m);
  for (int n = 1; n < most; ++n) {
    std::vector<float> out(size_t(n) * m), din(size_t(n) * k, 0.0f);
    const int seg[2] = {0, n};
    grouped_matmul_forward(out.data(), in.data(), wp, seg, 1, k, m);
    grouped_matmul_backward(din.data(), nullptr, dout.data(), in.data(), wp, seg, 1, k, m);
    ASSERT_EQ(std::memcmp(out.data(), out_all.data(), out.size() * sizeof(float)), 0)
        << "forward rows of a " << n << "-row segment differ from the same rows of " << most;
    ASSERT_EQ(std::memcmp(din.data(), din_all.data(), din.size() * sizeof(float)), 0)
        << "input-gradient rows of a " << n << "-row segment differ from the same rows of " << most;
  }
}

// gemm cuts large products into tiles (rows and columns) run on different threads: every tile must
// land where it belongs, for each transpose, with leading dimensions wider than the matrices and
// with alpha and beta. Judged against a float64 product (each element within 1e-5 of the sum of
// its terms' magnitudes, several times fp32's accumulation error at these k).
TEST(OpsMatmul, TiledProductMatchesFloat64) {
  std::mt19937 rng(8);
  struct Case {
    int m, n, k;
  };
  for (const Case cs : {Case{600, 40, 70}, Case{40, 700, 90}, Case{530, 610, 33}, Case{5, 7, 3}}) {
    for (int trans = 0; trans < 4; ++trans) {
      const bool ta = trans & 1, tb = trans & 2;
      SCOPED_TRACE("m=" + std::to_string(cs.m) + " n=" + std::to_string(cs.n) +
                   " k=" + std::to_string(cs.k) + (ta ? " Aᵀ" : "") + (tb ? " Bᵀ" : ""));
      const int lda = (ta ? cs.m : cs.k) + 3, ldb = (tb ? cs.k : cs.n) + 5, ldc = cs.n + 7;
      const std::vector<float> a = random_uniform(size_t(ta ? cs.k : cs.m) * lda, rng);
      const std::vector<float> b = random_uniform(size_t(tb ? cs.n : cs.k) * ldb, rng);
      std::vector<float> c = random_uniform(size_t(cs.m) * ldc, rng);
      const std::vector<float> c0 = c;
      const float alpha = 0.75f, beta = -0.5f;
      gemm(ta, tb, cs.m, cs.n, cs.k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
      for (int i = 0; i < cs.m; ++i)
        for (int j = 0; j < ldc; ++j) {
          const size_t at = size_t(i) * ldc + j;
          if (j >= cs.n) {  // the padding between rows is never written
            ASSERT_EQ(c[at], c0[at]) << "padding at row " << i << " column " << j << " written";
            continue;
          }
          double sum = 0, mag = 0;
          for (int l = 0; l < cs.k; ++l) {
            const double x = ta ? a[size_t(l) * lda + i] : a[size_t(i) * lda + l];
            const double y = tb ? b[size_t(j) * ldb + l] : b[size_t(l) * ldb + j];
            sum += x * y;
            mag += std::fabs(x * y);
          }
          const double want = alpha * sum + beta * double(c0[at]);
          ASSERT_NEAR(c[at], want, 1e-5 * (mag + std::fabs(c0[at])) + 1e-7)
              << "at row " << i << " column " << j;
        }
    }
  }
}

// The same product at 1, 2 and 3 threads, bit for bit (see ZayaModel.ResultsDoNotDependOnTheThread
// Count for why). OpenBLAS's own threading failed this: it splits a product between its threads at
// boundaries that depend on their number.
TEST(OpsMatmul, ProductsDoNotDependOnTheThreadCount) {
  std::mt19937 rng(9);
  const int saved = omp_get_max_threads();
  for (const int m : {64, 200, 512, 1000})
    for (const int n : {96, 256, 700})
      for (const int trans : {0, 1, 2}) {
        const int k = 160;
        const bool ta = trans == 2, tb = trans == 1;
        const std::vector<float> a = random_uniform(size_t(m) * k, rng);
        const std::vector<float> b = random_uniform(size_t(k) * n, rng);
        std::vector<std::vector<float>> c;
        for (const int threads : {1, 2, 3}) {
          omp_set_num_threads(threads);
          c.emplace_back(size_t(m) * n);
          gemm(ta, tb, m, n, k, 1.0f, a.data(), ta ? m : k, b.data(), tb ? k : n, 0.0f,
               c.back().data(), n);
        }
        for (size_t t = 1; t < c.size(); ++t)
          EXPECT_EQ(std::memcmp(c[t].data(), c[0].data(), c[0].size() * sizeof(float)), 0)
              << m << "x" << n << "x" << k << (ta ? " Aᵀ" : "") << (tb ? " Bᵀ" : "") << " at "
              << t + 1 << " threads differs from 1 thread";
      }
  omp_set_num_threads(saved);
}

}  // namespace
}  // namespace zaya::cpu
