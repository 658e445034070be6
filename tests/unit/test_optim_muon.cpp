// Newton–Schulz orthogonalisation: the quintic's singular-value band and its exact scalar map.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/newton_schulz.h"

namespace zaya {
namespace {

// Eigenvalues of a symmetric matrix s[n, n] by cyclic Jacobi rotations (small n, fp64).
std::vector<double> symmetric_eigenvalues(std::vector<double> s, int n) {
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0;
    for (int p = 0; p < n; ++p)
      for (int q = p + 1; q < n; ++q) off += s[p * n + q] * s[p * n + q];
    if (off < 1e-26) break;
    for (int p = 0; p < n; ++p) {
      for (int q = p + 1; q < n; ++q) {
        const double apq = s[p * n + q];
        if (std::abs(apq) < 1e-300) continue;
        const double theta = (s[q * n + q] - s[p * n + p]) / (2 * apq);
        const double t = (theta >= 0 ? 1 : -1) / (std::abs(theta) + std::sqrt(theta * theta + 1));
        const double c = 1 / std::sqrt(t * t + 1), sn = t * c;
        for (int k = 0; k < n; ++k) {  // rotate columns p, q
          const double akp = s[k * n + p], akq = s[k * n + q];
          s[k * n + p] = c * akp - sn * akq;
          s[k * n + q] = sn * akp + c * akq;
        }
        for (int k = 0; k < n; ++k) {  // rotate rows p, q
          const double apk = s[p * n + k], aqk = s[q * n + k];
          s[p * n + k] = c * apk - sn * aqk;
          s[q * n + k] = sn * apk + c * aqk;
        }
      }
    }
  }
  std::vector<double> eig(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) eig[size_t(i)] = s[i * n + i];
  return eig;
}

// Singular values of x[rows, cols] via the eigenvalues of the smaller Gram matrix.
std::vector<double> singular_values(const std::vector<float>& x, int rows, int cols) {
  const bool wide = rows <= cols;
  const int m = wide ? rows : cols;
  std::vector<double> gram(size_t(m * m), 0.0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < m; ++j) {
      double s = 0;
      if (wide) {
        for (int k = 0; k < cols; ++k) s += double(x[i * cols + k]) * x[j * cols + k];
      } else {
        for (int k = 0; k < rows; ++k) s += double(x[k * cols + i]) * x[k * cols + j];
      }
      gram[size_t(i * m + j)] = s;
    }
  std::vector<double> sv = symmetric_eigenvalues(gram, m);
  for (double& v : sv) v = std::sqrt(std::max(v, 0.0));
  return sv;
}

std::vector<float> random_matrix(int rows, int cols, uint32_t seed, float diagonal = 0) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(size_t(rows * cols));
  for (float& v : g) v = normal(rng);
  for (int i = 0; i < std::min(rows, cols); ++i) g[size_t(i * cols + i)] += diagonal;
  return g;
}

// The quintic maps every normalised singular value >= 1.5e-3 into [0.68, 1.21] after 5 steps
// (0.6817 and 1.2024 are the extremes of the scalar map over that range); random rectangular
// matrices and a diagonally dominant square one have all theirs well above 1.5e-3.
TEST(NewtonSchulz, SingularValuesLandInTheQuinticBand) {
  struct Case {
    int rows, cols;
    float diagonal;
  };
  for (const Case& c : {Case{96, 32, 0}, Case{32, 96, 0}, Case{17, 40, 0}, Case{48, 48, 20}}) {
    const std::vector<float> g = random_matrix(c.rows, c.cols, 7, c.diagonal);
    const std::vector<double> before = singular_values(g, c.rows, c.cols);
    std::vector<float> out(g.size());
    NsWorkspace ws;
    newton_schulz(g.data(), out.data(), c.rows, c.cols, 5, ws);
    const std::vector<double> after = singular_values(out, c.rows, c.cols);
    const double lo = *std::min_element(after.begin(), after.end());
    const double hi = *std::max_element(after.begin(), after.end());
    SCOPED_TRACE(::testing::Message() << c.rows << "x" << c.cols << ": input sv range ["
                                      << *std::min_element(before.begin(), before.end()) << ", "
                                      << *std::max_element(before.begin(), before.end()) << "]");
    EXPECT_GE(lo, 0.68);
    EXPECT_LE(hi, 1.21);
  }
}

// On a diagonal matrix every step acts on each diagonal entry by the scalar map
// σ ← aσ + bσ³ + cσ⁵, so the output diagonal must equal that map iterated in fp64.
TEST(NewtonSchulz, DiagonalFollowsTheScalarQuintic) {
  const std::vector<double> sigma = {3.0, 1.0, 0.25, 0.04};
  const int n = int(sigma.size());
  for (bool tall : {false, true}) {
    const int rows = tall ? n + 2 : n, cols = tall ? n : n + 3;  // zero padding rows/cols
    std::vector<float> g(size_t(rows * cols), 0.0f);
    double frob = 0;
    for (int i = 0; i < n; ++i) {
      g[size_t(i * cols + i)] = float(sigma[size_t(i)]);
      frob += sigma[size_t(i)] * sigma[size_t(i)];
    }
    std::vector<float> out(g.size());
    NsWorkspace ws;
    newton_schulz(g.data(), out.data(), rows, cols, 5, ws);
    for (int i = 0; i < n; ++i) {
      double s = sigma[size_t(i)] / (std::sqrt(frob) + 1e-7);
      for (int k = 0; k < 5; ++k) s = 3.4445 * s - 4.7750 * s * s * s + 2.0315 * std::pow(s, 5);
      EXPECT_NEAR(out[size_t(i * cols + i)], s, 2e-5) << "entry " << i << (tall ? " tall" : "");
    }
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        if (r != c) {
          EXPECT_EQ(out[size_t(r * cols + c)], 0.0f) << r << "," << c;
        }
      }
  }
}

}  // namespace
}  // namespace zaya
