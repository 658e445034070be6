// The decode products must give each row the same bits whatever else is in the call: the row
// alone, among others, at another place, at another thread count. And they must be the product
// (against float64).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/rowwise.h"
#include "test_util.h"

namespace zaya {
namespace {

TEST(OpsRowwise, RowsDoNotDependOnTheBatch) {
  for (const auto& [k, m] : {std::pair{67, 29}, std::pair{256, 1024}, std::pair{16, 3},
                             std::pair{1, 5}, std::pair{130, 97}}) {
    const int n = 37;
    const std::vector<float> in = test::normal_floats(size_t(n) * k, uint32_t(k));
    const std::vector<float> w = test::normal_floats(size_t(m) * k, uint32_t(m));
    const std::vector<float> bias = test::normal_floats(size_t(m), 9);
    std::vector<float> all(size_t(n) * m);
    cpu::rows_matmul_forward(all.data(), in.data(), w.data(), bias.data(), n, k, m);
    // Each row alone, and the rows in reverse order, at 1 and 2 threads.
    const int saved = omp_get_max_threads();
    for (const int threads : {1, 2}) {
      omp_set_num_threads(threads);
      std::vector<float> reversed_in(in.size()), reversed(all.size());
      std::vector<float> alone(static_cast<size_t>(m));
      for (int r = 0; r < n; ++r)
        std::memcpy(&reversed_in[size_t(n - 1 - r) * k], &in[size_t(r) * k], sizeof(float) * k);
      cpu::rows_matmul_forward(reversed.data(), reversed_in.data(), w.data(), bias.data(), n, k, m);
      for (int r = 0; r < n; ++r) {
        cpu::rows_matmul_forward(alone.data(), &in[size_t(r) * k], w.data(), bias.data(), 1, k, m);
        for (int o = 0; o < m; ++o) {
          const float want = all[size_t(r) * m + o];
          ASSERT_EQ(alone[size_t(o)], want) << "row " << r << " alone, k " << k << ", m " << m;
          ASSERT_EQ(reversed[size_t(n - 1 - r) * m + o], want) << "row " << r << " moved";
          ASSERT_EQ(
              cpu::fixed_order_dot(&in[size_t(r) * k], &w[size_t(o) * k], k) + bias[size_t(o)],
              want);
        }
      }
    }
    omp_set_num_threads(saved);
    // The product itself, against float64: each sum has at most k/16 + 5 roundings in a row
    // (a lane's k/16 terms, the tail, the 4-level tree, the bias), so the classic bound
    // |error| <= γ_depth · (Σ|a·b| + |bias|) holds with γ = depth · 2^-24 (to first order).
    for (int r = 0; r < n; ++r)
      for (int o = 0; o < m; ++o) {
        double ref = bias[size_t(o)], mag = std::abs(bias[size_t(o)]);
        for (int i = 0; i < k; ++i) {
          const double p = double(in[size_t(r) * k + i]) * w[size_t(o) * k + i];
          ref += p;
          mag += std::abs(p);
        }
        const double depth = k / 16 + 6;
        ASSERT_LE(std::abs(ref - all[size_t(r) * m + o]), depth * 0x1p-24 * mag)
            << "row " << r << ", column " << o << ", k " << k;
      }
  }
}

TEST(OpsRowwise, GroupedIsEachGroupsProductBitwise) {
  // Groups of 0 to 5 rows (empty ones among them, first and last included), shapes below, at and
  // above the 4-row blocks and the 16-lane sums.
  const std::vector<int> rows = {0, 2, 1, 0, 5, 3, 1, 0};
  std::vector<int> offsets = {0};
  for (const int r : rows) offsets.push_back(offsets.back() + r);
  const int groups = int(rows.size()), n = offsets.back();
  for (const auto& [k, m] :
       {std::pair{67, 29}, std::pair{256, 64}, std::pair{16, 3}, std::pair{1, 5}}) {
    const std::vector<float> in = test::normal_floats(size_t(n) * k, uint32_t(k + 7));
    std::vector<std::vector<float>> w;
    std::vector<const float*> weights;
    for (int g = 0; g < groups; ++g)
      w.push_back(test::normal_floats(size_t(m) * k, uint32_t(100 + g)));
    for (const auto& wg : w) weights.push_back(wg.data());
    std::vector<float> want(size_t(n) * m);
    for (int g = 0; g < groups; ++g)
      cpu::rows_matmul_forward(&want[size_t(offsets[g]) * m], &in[size_t(offsets[g]) * k],
                               weights[g], nullptr, rows[size_t(g)], k, m);
    const int saved = omp_get_max_threads();
    for (const int threads : {1, 2}) {
      omp_set_num_threads(threads);
      std::vector<float> got(size_t(n) * m, -1.0f);
      cpu::grouped_rows_matmul_forward(got.data(), in.data(), weights.data(), offsets.data(),
                                       groups, k, m);
      ASSERT_EQ(got, want) << "k " << k << ", m " << m << ", " << threads << " threads";
    }
    omp_set_num_threads(saved);
  }
}

TEST(OpsRowwise, EmptyCallsWriteNothing) {
  std::vector<float> out(4, 7.0f);
  const std::vector<float> x(4, 1.0f);
  cpu::rows_matmul_forward(out.data(), x.data(), x.data(), nullptr, 0, 4, 1);
  EXPECT_EQ(out, std::vector<float>(4, 7.0f));
}

}  // namespace
}  // namespace zaya
