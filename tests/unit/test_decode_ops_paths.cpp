// The decode step's CCA convolution and attention over the paged cache on every CPU vector path
// this machine runs: each the bits of a plain scalar loop in the order the op's header states
// (their vector forms run several channels or positions side by side, one per lane, and must not
// change one addition), and that loop the float64 result to float32's accuracy. Shapes with d a
// multiple of the lanes and not (12: the tails), contexts of 0, 5 and 37 positions over blocks of
// 16 in scrambled order.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/fast_exp.h"
#include "backend/vector_path.h"
#include "test_util.h"

namespace zaya {
namespace {

struct ConvCase {
  int n, nq, nk, d;
};

// cca_decode_conv as decode_ops.h states it, one channel at a time.
std::vector<float> scalar_conv(const std::vector<float>& proj, const std::vector<float>& window,
                               const std::vector<int32_t>& slots, const CcaDecodeStep& s) {
  const int g = s.nq / s.nk, Dq = s.nq * s.d, Dk = s.nk * s.d, C = Dq + Dk, P = C + Dk, d = s.d;
  std::vector<float> z(size_t(s.n) * C), a0(static_cast<size_t>(C)), a1(static_cast<size_t>(C));
  for (int r = 0; r < s.n; ++r) {
    const float* u = &proj[size_t(r) * P];
    const float* u2 = &window[size_t(slots[size_t(r)]) * 2 * C];
    const float* u1 = u2 + C;
    for (int ch = 0; ch < C; ++ch) {
      const float w0 = s.conv0_w[2 * ch], w1 = s.conv0_w[2 * ch + 1];
      a0[size_t(ch)] = s.conv0_b[ch] + w0 * u2[ch] + w1 * u1[ch];
      a1[size_t(ch)] = s.conv0_b[ch] + w0 * u1[ch] + w1 * u[ch];
    }
    for (int ch = 0; ch < C; ++ch) {
      const int g0 = ch / d * d;
      float s0 = 0.0f, s1 = 0.0f;
      for (int j = 0; j < d; ++j) {
        s0 += s.conv1_w[size_t(ch) * 2 * d + 2 * j] * a0[size_t(g0 + j)];
        s1 += s.conv1_w[size_t(ch) * 2 * d + 2 * j + 1] * a1[size_t(g0 + j)];
      }
      float& out = z[size_t(r) * C + ch];
      out = s0 + s1 + s.conv1_b[ch];
      if (ch < Dq) {
        out += 0.5f * (u[ch] + u[Dq + (ch / d) / g * d + ch % d]);
      } else {
        const int j = (ch - Dq) / d, i = (ch - Dq) % d;
        float mean = 0.0f;
        for (int h = j * g; h < (j + 1) * g; ++h) mean += u[h * d + i];
        mean /= float(g);
        out += 0.5f * mean + 0.5f * u[ch];
      }
    }
  }
  return z;
}

TEST(DecodeOpsPaths, ConvIsTheScalarLoopOnEveryPath) {
  // 47 rows: enough work for the threads (whole head groups each), rows in fours and a remainder
  // of 3; 5 and 16: in fours (and one alone), on the calling thread.
  for (const ConvCase c : {ConvCase{5, 4, 2, 32}, ConvCase{3, 4, 2, 12}, ConvCase{2, 2, 2, 8},
                           ConvCase{47, 4, 2, 32}, ConvCase{16, 6, 2, 16}}) {
    const int C = (c.nq + c.nk) * c.d, P = C + c.nk * c.d, slots_total = 7;
    const std::vector<float> proj = test::normal_floats(size_t(c.n) * P, 1);
    const std::vector<float> window = test::normal_floats(size_t(slots_total) * 2 * C, 2);
    const std::vector<float> conv0_w = test::normal_floats(size_t(C) * 2, 3),
                             conv0_b = test::normal_floats(size_t(C), 4),
                             conv1_w = test::normal_floats(size_t(C) * c.d * 2, 5),
                             conv1_b = test::normal_floats(size_t(C), 6);
    std::vector<int32_t> slots;
    for (int r = 0; r < c.n; ++r) slots.push_back((5 * r + 3) % slots_total);
    CcaDecodeStep s;
    s.n = c.n;
    s.nq = c.nq;
    s.nk = c.nk;
    s.d = c.d;
    s.conv0_w = conv0_w.data();
    s.conv0_b = conv0_b.data();
    s.conv1_w = conv1_w.data();
    s.conv1_b = conv1_b.data();
    const std::vector<float> want = scalar_conv(proj, window, slots, s);
    const int saved = omp_get_max_threads();
    for (const VectorPath path : test::paths_this_cpu_runs())
      for (const int threads : {1, 2, 3}) {
        omp_set_num_threads(threads);
        std::vector<float> got(want.size(), -1.0f);
        cpu_backend(path).cca_decode_conv(got.data(), proj.data(), window.data(), slots.data(), s);
        omp_set_num_threads(saved);
        ASSERT_EQ(got, want) << vector_path_name(path) << ", d " << c.d << ", " << c.n << " rows, "
                             << threads << " threads";
      }
    // The loop is the convolution: against float64, each output within d + 8 roundings of the
    // sum of its terms' magnitudes.
    const int g = c.nq / c.nk, Dq = c.nq * c.d;
    for (int r = 0; r < c.n; ++r)
      for (int ch = 0; ch < C; ++ch) {
        const float* u = &proj[size_t(r) * P];
        const float* u2 = &window[size_t(slots[size_t(r)]) * 2 * C];
        const int g0 = ch / c.d * c.d;
        double sum = conv1_b[size_t(ch)], mag = std::abs(sum);
        for (int j = 0; j < c.d; ++j) {
          const int k = g0 + j;
          const double w0 = conv0_w[size_t(2 * k)], w1 = conv0_w[size_t(2 * k + 1)];
          const double a0 = conv0_b[size_t(k)] + w0 * u2[k] + w1 * u2[C + k];
          const double a1 = conv0_b[size_t(k)] + w0 * u2[C + k] + w1 * u[k];
          const double c0 = conv1_w[size_t(ch) * 2 * c.d + 2 * size_t(j)];
          const double c1 = conv1_w[size_t(ch) * 2 * c.d + 2 * size_t(j) + 1];
          sum += c0 * a0 + c1 * a1;
          const double b = std::abs(double(conv0_b[size_t(k)]));
          mag += std::abs(c0) * (b + std::abs(w0 * u2[k]) + std::abs(w1 * u2[C + k])) +
                 std::abs(c1) * (b + std::abs(w0 * u2[C + k]) + std::abs(w1 * u[k]));
        }
        double skip;
        if (ch < Dq) {
          skip = 0.5 * (double(u[ch]) + u[Dq + (ch / c.d) / g * c.d + ch % c.d]);
        } else {
          const int j = (ch - Dq) / c.d, i = (ch - Dq) % c.d;
          double mean = 0;
          for (int h = j * g; h < (j + 1) * g; ++h) mean += u[h * c.d + i];
          skip = 0.5 * mean / g + 0.5 * u[ch];
        }
        const double tol = (c.d + 8) * 0x1p-24 * (mag + 2 * std::abs(skip) + std::abs(sum));
        ASSERT_NEAR(want[size_t(r) * C + ch], sum + skip, tol) << "row " << r << ", channel " << ch;
      }
  }
}

struct AttentionCase {
  int nq, nk, d;
  float q_scale = 1.0f;  // large: scores far below the max, where fast_exp's clamp gives 0
};

// A cache whose blocks hold [block_size, Dk] keys, then as many values.
PagedKv paged_kv(const std::vector<float>& cache, const std::vector<int32_t>& blocks,
                 const std::vector<int32_t>& counts, int max_blocks, int block_size, int Dk) {
  PagedKv kv;
  kv.keys = cache.data();
  kv.block_stride = int64_t(2) * block_size * Dk;
  kv.values_offset = int64_t(block_size) * Dk;
  kv.blocks = blocks.data();
  kv.counts = counts.data();
  kv.max_blocks = max_blocks;
  kv.block_size = block_size;
  return kv;
}

TEST(DecodeOpsPaths, AttentionIsTheScalarLoopOnEveryPath) {
  // Row 0 holds no position, row 1 five in block 5, row 2 thirty-seven in blocks 4, 1, 3.
  const int n = 3, block_size = 16, max_blocks = 3, pool = 6;
  const std::vector<int32_t> blocks = {0, 0, 0, 5, 0, 0, 4, 1, 3};
  const std::vector<int32_t> counts = {0, 0, 0, 5, 0, 0, 16, 16, 5};
  for (const AttentionCase c :
       {AttentionCase{4, 2, 32}, AttentionCase{4, 2, 12}, AttentionCase{2, 1, 40},
        AttentionCase{3, 1, 16}, AttentionCase{2, 2, 8}, AttentionCase{6, 2, 32, 30.0f}}) {
    const int Dk = c.nk * c.d, Dq = c.nq * c.d, g = c.nq / c.nk, items = n * c.nq;
    const std::vector<float> cache = test::normal_floats(size_t(pool) * 2 * block_size * Dk, 11);
    std::vector<float> q = test::normal_floats(size_t(n) * Dq, 12);
    for (float& v : q) v *= c.q_scale;
    const PagedKv kv = paged_kv(cache, blocks, counts, max_blocks, block_size, Dk);
    // The loop the header states, and float64's softmax-weighted values beside it.
    const float scale = float(1.0 / std::sqrt(double(c.d)));
    const size_t count = static_cast<size_t>(items);
    std::vector<float> want_max(count), want_sum(count), want_out(count * size_t(c.d));
    int clamped = 0;  // terms fast_exp gives as 0
    for (int item = 0; item < items; ++item) {
      const int r = item / c.nq, h = item % c.nq, j = h / g;
      std::vector<const float*> keys, values;
      for (int i = 0; i < max_blocks && counts[size_t(r * max_blocks + i)] > 0; ++i)
        for (int p = 0; p < counts[size_t(r * max_blocks + i)]; ++p) {
          const float* base =
              cache.data() + size_t(blocks[size_t(r * max_blocks + i)]) * kv.block_stride;
          keys.push_back(base + size_t(p) * Dk + size_t(j) * c.d);
          values.push_back(base + kv.values_offset + size_t(p) * Dk + size_t(j) * c.d);
        }
      std::vector<float> score;
      for (const float* k : keys) {
        float dot = 0.0f;
        for (int x = 0; x < c.d; ++x) dot += q[size_t(r) * Dq + size_t(h) * c.d + x] * k[x];
        score.push_back(dot * scale);
      }
      float mx = -INFINITY, total = 0.0f;
      for (const float sc : score) mx = std::max(mx, sc);
      for (float& sc : score) total += sc = cpu::fast_exp(sc - mx);
      for (const float sc : score) clamped += sc == 0.0f;
      want_max[size_t(item)] = keys.empty() ? -INFINITY : mx;
      want_sum[size_t(item)] = total;
      for (int x = 0; x < c.d; ++x) {
        float o = 0.0f;
        double o64 = 0, total64 = 0, m64 = -INFINITY;
        for (size_t p = 0; p < keys.size(); ++p) o += score[p] * values[p][x];
        want_out[size_t(item) * c.d + x] = o;
        std::vector<double> s64;
        for (const float* k : keys) {
          double dot = 0;
          for (int y = 0; y < c.d; ++y)
            dot += double(q[size_t(r) * Dq + size_t(h) * c.d + y]) * k[y];
          s64.push_back(dot / std::sqrt(double(c.d)));
          m64 = std::max(m64, s64.back());
        }
        for (size_t p = 0; p < keys.size(); ++p) {
          total64 += std::exp(s64[p] - m64);
          o64 += std::exp(s64[p] - m64) * values[p][x];
        }
        if (!keys.empty()) {
          ASSERT_NEAR(o / total, o64 / total64, 2e-5) << "item " << item << ", x " << x;
        }
      }
    }
    ASSERT_EQ(want_max[0], -INFINITY);  // the empty row
    ASSERT_EQ(clamped > 0, c.q_scale > 1.0f) << clamped << " terms below exp's range";
    // At 1, 2 and 7 threads: the op groups query heads into work items by the thread count (pairs
    // of a key head's heads, or single heads where rows are few), which must not change a bit.
    const int saved = omp_get_max_threads();
    for (const VectorPath path : test::paths_this_cpu_runs())
      for (const int threads : {1, 2, 7}) {
        omp_set_num_threads(threads);
        std::vector<float> mx(size_t(items), 7.0f), sum(size_t(items), 7.0f),
            out(size_t(items) * c.d, 7.0f), scores(size_t(items) * max_blocks * block_size, 7.0f);
        cpu_backend(path).kv_attention_partials(mx.data(), sum.data(), out.data(), scores.data(),
                                                q.data(), kv, n, c.nq, c.nk, c.d);
        const std::string where = std::string(vector_path_name(path)) + ", d " +
                                  std::to_string(c.d) + ", " + std::to_string(threads) + " threads";
        EXPECT_EQ(mx, want_max) << where;
        EXPECT_EQ(sum, want_sum) << where;
        EXPECT_EQ(out, want_out) << where;
      }
    omp_set_num_threads(saved);
  }
}

// Enough positions for the threads (the test above stays below the threshold): rows of 0 to 211
// positions in scattered blocks, split among 2 and 3 threads by their positions, give every
// item the bits one thread gives it, on every path. (Not 7 threads, as the test above: a team that
// large leaves libomp's allocations to LeakSanitizer in the sanitizer build's single-threaded
// runs.) With AttentionIsTheScalarLoopOnEveryPath (one
// thread's items are the scalar loop), every thread count is the scalar loop.
TEST(DecodeOpsPaths, AttentionSplitAmongThreadsIsOneThreadsBitwise) {
  const int n = 9, nq = 4, nk = 2, d = 32, block_size = 16, max_blocks = 14;
  const int Dk = nk * d, lengths[n] = {200, 0, 17, 211, 64, 3, 150, 96, 31};
  std::vector<int32_t> blocks(size_t(n) * max_blocks, 0), counts(blocks.size(), 0);
  int pool = 0;
  int64_t held = 0;
  for (int r = 0; r < n; ++r) {
    held += lengths[r];
    for (int i = 0; i * block_size < lengths[r]; ++i) {
      blocks[size_t(r * max_blocks + i)] = (pool * 37) % 160;  // scattered, all distinct
      counts[size_t(r * max_blocks + i)] = std::min(block_size, lengths[r] - i * block_size);
      ++pool;
    }
  }
  ASSERT_LE(pool, 160);
  ASSERT_GE(held * nq * d, int64_t(1) << 16);  // the op's threshold for threads
  const std::vector<float> cache = test::normal_floats(size_t(160) * 2 * block_size * Dk, 21);
  const std::vector<float> q = test::normal_floats(size_t(n) * nq * d, 22);
  const PagedKv kv = paged_kv(cache, blocks, counts, max_blocks, block_size, Dk);
  const size_t items = size_t(n) * nq;
  const int saved = omp_get_max_threads();
  for (const VectorPath path : test::paths_this_cpu_runs()) {
    std::vector<float> one_thread;
    for (const int threads : {1, 2, 3}) {
      std::vector<float> mx(items, -1.0f), sum(items, -1.0f), out(items * d, -1.0f);
      std::vector<float> scores(items * max_blocks * block_size);
      omp_set_num_threads(threads);
      cpu_backend(path).kv_attention_partials(mx.data(), sum.data(), out.data(), scores.data(),
                                              q.data(), kv, n, nq, nk, d);
      omp_set_num_threads(saved);
      std::vector<float> all = mx;
      all.insert(all.end(), sum.begin(), sum.end());
      all.insert(all.end(), out.begin(), out.end());
      if (threads == 1) {
        one_thread = all;
        continue;
      }
      ASSERT_EQ(all, one_thread) << vector_path_name(path) << ", " << threads << " threads";
    }
    // Every item written (the sentinel -1 is no sum of positive terms, nor row 1's 0).
    for (size_t it = 0; it < items; ++it) ASSERT_NE(one_thread[items + it], -1.0f) << it;
  }
}

}  // namespace
}  // namespace zaya
