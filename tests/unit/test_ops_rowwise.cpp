// The decode products must give each row the same bits whatever else is in the call: the row
// alone, among others, at another place, at another thread count. And they must be the product
// (against float64), on every vector path the very loop rowwise.h states.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/rowwise.h"
#include "backend/vector_path.h"
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

// One output element as rowwise.h states it, one lane at a time: lane j of 16 adds a[i]·b[i] for
// i ≡ j (mod 16) in order of i (the last k mod 16 as one more step, zero-padded), then the tree
// 16 → 8 → 4 → 2 → 1 in which lane j adds lane j + width.
float scalar_fixed_order_dot(const float* a, const float* b, int k) {
  float lane[16] = {};
  for (int step = 0; step < (k + 15) / 16; ++step)
    for (int j = 0; j < 16; ++j) {
      const int i = 16 * step + j;
      lane[j] += (i < k ? a[i] : 0.0f) * (i < k ? b[i] : 0.0f);
    }
  for (int width = 8; width >= 1; width /= 2)
    for (int j = 0; j < width; ++j) lane[j] = lane[j] + lane[j + width];
  return lane[0];
}

// The vector paths run tiles of rows and parts of the 16 lanes in whatever order suits their
// registers (AVX2: 3 rows × 4 weight rows, one half of the lanes at a time): none of it may change
// an addition. 1 to 7 rows, 16 and 37 (every remainder of the tiles), k with and without a tail,
// m with and without a partial block of 4, one and two threads (k = 44: a tail reaching lanes 8 to
// 11, the second part on the AVX2 path).
TEST(OpsRowwise, EveryPathIsTheScalarLoop) {
  const int saved = omp_get_max_threads();
  for (const auto& [k, m] : {std::pair{256, 36}, std::pair{67, 29}, std::pair{16, 3},
                             std::pair{1, 5}, std::pair{130, 9}, std::pair{44, 7}})
    for (const int n : {1, 2, 3, 4, 5, 6, 7, 16, 37}) {
      const std::vector<float> in = test::normal_floats(size_t(n) * k, uint32_t(k + n));
      const std::vector<float> w = test::normal_floats(size_t(m) * k, uint32_t(m));
      const std::vector<float> bias = test::normal_floats(size_t(m), 5);
      std::vector<float> want(size_t(n) * m);
      for (int r = 0; r < n; ++r)
        for (int o = 0; o < m; ++o)
          want[size_t(r) * m + o] =
              scalar_fixed_order_dot(&in[size_t(r) * k], &w[size_t(o) * k], k) + bias[size_t(o)];
      // The same rows as two groups of other weights' products: the grouped form's bits too.
      const std::vector<int> offsets = {0, n / 2, n / 2, n};
      const std::vector<const float*> weights = {w.data(), nullptr, w.data()};
      for (const VectorPath path : test::paths_this_cpu_runs())
        for (const int threads : {1, 2}) {
          omp_set_num_threads(threads);
          const std::string where = std::string(vector_path_name(path)) + ", " + std::to_string(n) +
                                    " rows, k " + std::to_string(k) + ", m " + std::to_string(m) +
                                    ", " + std::to_string(threads) + " threads";
          std::vector<float> got(want.size(), -1.0f), grouped(want.size(), -1.0f);
          cpu_backend(path).rows_matmul_forward(got.data(), in.data(), w.data(), bias.data(), n, k,
                                                m);
          ASSERT_EQ(got, want) << where;
          cpu_backend(path).grouped_rows_matmul_forward(grouped.data(), in.data(), weights.data(),
                                                        offsets.data(), 3, k, m);
          for (size_t i = 0; i < want.size(); ++i)
            ASSERT_EQ(grouped[i] + bias[i % size_t(m)], want[i]) << where << ", grouped " << i;
        }
    }
  omp_set_num_threads(saved);
}

TEST(OpsRowwise, EmptyCallsWriteNothing) {
  std::vector<float> out(4, 7.0f);
  const std::vector<float> x(4, 1.0f);
  cpu::rows_matmul_forward(out.data(), x.data(), x.data(), nullptr, 0, 4, 1);
  EXPECT_EQ(out, std::vector<float>(4, 7.0f));
}

}  // namespace
}  // namespace zaya
