#include "backend/cpu/blas_self_check.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/error.h"

namespace zaya::cpu::blas {

namespace {

struct Product {
  int m, n, k;
  bool trans_a, trans_b;
  float alpha, beta;
};

// The shapes and transposes of zaya's products: forward x·Wᵀ (NT), the input gradient dy·W (NN),
// the weight gradient dyᵀ·x (TN, accumulated with beta 1), attention's scores and values. Sizes
// from one entry to beyond the kernels' register blocks and cache panels (k = 1100 spans several
// of OpenBLAS's K-panels), odd edges, and one of the 64-row expert tiles.
constexpr Product kProducts[] = {
    {1, 1, 1, false, true, 1.0f, 0.0f},       {3, 5, 7, false, true, 1.0f, 0.0f},
    {17, 33, 65, false, true, 1.0f, 0.0f},    {64, 96, 128, false, true, 1.0f, 0.0f},
    {130, 70, 257, false, true, 1.0f, 1.0f},  {96, 64, 1100, false, true, 1.0f, 0.0f},
    {3, 5, 7, false, false, 1.0f, 0.0f},      {17, 33, 65, false, false, 1.0f, 1.0f},
    {130, 70, 257, false, false, 1.0f, 0.0f}, {192, 160, 288, false, false, 1.0f, 0.0f},
    {5, 3, 7, true, false, 1.0f, 1.0f},       {33, 17, 65, true, false, 1.0f, 1.0f},
    {70, 130, 257, true, false, 0.5f, 1.0f},  {160, 192, 288, true, false, 1.0f, 1.0f},
    {9, 11, 13, true, true, 1.0f, 0.0f},      {70, 66, 129, true, true, 1.0f, 0.0f},
};

// Deterministic values in [-1, 1) scaled by powers of two in [1/8, 8], with exact zeros: products
// whose terms differ in size and sign, as a model's do.
class Values {
 public:
  float next() {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    const uint32_t bits = uint32_t(state_ >> 33);
    if (bits % 17 == 0) return 0.0f;
    const float unit = float(bits % (1u << 20)) / float(1u << 19) - 1.0f;
    return std::ldexp(unit, int((bits >> 20) % 7) - 3);
  }

 private:
  uint64_t state_ = 0x9e3779b97f4a7c15ull;
};

// A matrix of `rows` x `cols` stored with a padded leading dimension (as zaya's strided views).
struct Matrix {
  int rows, cols, ld;
  std::vector<float> data;
  Matrix(int r, int c, Values& values) : rows(r), cols(c), ld(c + 3), data(size_t(r) * ld) {
    for (float& x : data) x = values.next();
  }
  float at(int r, int c) const { return data[size_t(r) * ld + c]; }
};

std::string transposes(const Product& p) {
  return std::string(p.trans_a ? "T" : "N") + (p.trans_b ? "T" : "N");
}

// Checks one product; returns false (and fills `result.failure`) at the first entry out of bound.
bool check_product(const GemmFunction& gemm, const Product& p, Values& values,
                   SelfCheckResult& result) {
  // op(A) is m x k: A is stored k x m when transposed; op(B) is k x n: B is stored n x k when
  // transposed.
  const Matrix a = p.trans_a ? Matrix(p.k, p.m, values) : Matrix(p.m, p.k, values);
  const Matrix b = p.trans_b ? Matrix(p.n, p.k, values) : Matrix(p.k, p.n, values);
  Matrix c(p.m, p.n, values);
  const Matrix c0 = c;
  gemm(p.trans_a, p.trans_b, p.m, p.n, p.k, p.alpha, a.data.data(), a.ld, b.data.data(), b.ld,
       p.beta, c.data.data(), c.ld);
  const double unit_roundoff = std::ldexp(1.0, -24);
  // About 2,000 entries a product (every one of the small ones); an odd stride walks all columns,
  // and the last entry, where partial blocks meet, is always checked.
  const long long total = (long long)p.m * p.n;
  const long long stride = 1 + 2 * (total / 4000);
  auto entry_ok = [&](long long idx) {
    const int i = int(idx / p.n), j = int(idx % p.n);
    double exact = 0.0, magnitude = 0.0;
    for (int l = 0; l < p.k; ++l) {
      const double x = p.trans_a ? a.at(l, i) : a.at(i, l);
      const double y = p.trans_b ? b.at(j, l) : b.at(l, j);
      exact += x * y;
      magnitude += std::fabs(x * y);
    }
    exact = p.alpha * exact + double(p.beta) * c0.at(i, j);
    magnitude = std::fabs(p.alpha) * magnitude + std::fabs(double(p.beta) * c0.at(i, j));
    const double bound =
        (p.k + 2) * unit_roundoff * magnitude + double(std::numeric_limits<float>::min());
    const double got = c.at(i, j);
    const double error = std::fabs(got - exact);
    ++result.entries;
    if (error <= bound) {
      result.worst_ratio = std::max(result.worst_ratio, error / bound);
      return true;
    }
    // NaN compares false above: it fails too.
    result.worst_ratio = std::isnan(error) ? HUGE_VAL : std::max(result.worst_ratio, error / bound);
    result.failure = str_cat(transposes(p), " ", p.m, "x", p.n, "x", p.k, " (alpha ", p.alpha,
                             ", beta ", p.beta, "): C[", i, ",", j, "] = ", got, ", float64 gives ",
                             exact, " (error ", error, ", bound ", bound, ")");
    return false;
  };
  for (long long idx = 0; idx < total; idx += stride)
    if (!entry_ok(idx)) return false;
  if ((total - 1) % stride != 0 && !entry_ok(total - 1)) return false;
  return true;
}

}  // namespace

SelfCheckResult check_gemm(const GemmFunction& gemm) {
  SelfCheckResult result;
  Values values;
  for (const Product& p : kProducts) {
    ++result.products;
    if (!check_product(gemm, p, values, result)) {
      result.ok = false;
      break;
    }
  }
  return result;
}

}  // namespace zaya::cpu::blas
