// The MoE layer's GPU ops against the CPU: GELU and the grouped expert products against their
// cpu:: ops, and the routing steps against plain host loops written here from model/moe.cpp's
// definitions (top-1 with the balancing biases, a stable sort of tokens by route, the gather, the
// gated combine with the skip route, the scatter). Routes include an expert that gets no token.
// And the embedding's gather and backward, bitwise the CPU's.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cpu/activation.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/model_ops.h"
#include "backend/cuda/device.h"
#include "backend/cuda/ops.h"
#include "gpu_test_util.h"
#include "model/moe.h"

namespace zaya {
namespace {

using namespace test;
using Ints = std::vector<int32_t>;

TEST(GpuOps, Gelu) {
  for (const long n : {1L, 2L, 3L, 1000L}) {
    const Floats x = random_floats(size_t(n), 70, -5.0f, 5.0f), dy = random_floats(size_t(n), 71);
    Floats y(static_cast<size_t>(n)), dx = random_floats(size_t(n), 72);
    DeviceBuffer<float> dx_(x), dy_(static_cast<size_t>(n)), ddy(dy), ddx(dx);
    cpu::gelu_forward(y.data(), x.data(), n);
    cpu::gelu_backward(dx.data(), dy.data(), x.data(), n);
    cuda::gelu_forward(dy_.get(), dx_.get(), n);
    cuda::gelu_backward(ddx.get(), ddy.get(), dx_.get(), n);
    EXPECT_TRUE(elementwise_close(dy_.download(), y, kTolerance)) << n;
    EXPECT_TRUE(elementwise_close(ddx.download(), dx, kTolerance)) << n;
  }
}

// Routes of N tokens over `routes` (the last is the skip route); expert 1 gets none.
struct Routing {
  int n, routes, n_exp;
  Floats probs, biases;
  Ints route, order, offsets;
};

Routing make_routing(int n, int routes) {
  Routing r{n,
            routes,
            0,
            random_floats(size_t(n) * routes, 73, 0.0f, 1.0f),
            random_floats(size_t(routes), 74, -0.1f, 0.1f),
            {},
            {},
            {}};
  for (int t = 0; t < n; ++t) r.probs[size_t(t) * routes + 1] = -10.0f;  // nobody picks expert 1
  if (n > 2) {  // an exact tie: the first route wins
    r.probs[2 * size_t(routes) + 0] = 0.9f - r.biases[0];
    r.probs[2 * size_t(routes) + 3] = 0.9f - r.biases[3];
  }
  for (int t = 0; t < n; ++t)
    r.route.push_back(
        cpu::top1_route(r.probs.data() + size_t(t) * routes, r.biases.data(), routes));
  r.order.resize(static_cast<size_t>(n));
  std::iota(r.order.begin(), r.order.end(), 0);
  std::stable_sort(r.order.begin(), r.order.end(),
                   [&](int a, int b) { return r.route[size_t(a)] < r.route[size_t(b)]; });
  r.offsets.assign(size_t(routes) + 1, 0);
  for (int t = 0; t < n; ++t) ++r.offsets[size_t(r.route[size_t(t)]) + 1];
  for (int e = 0; e < routes; ++e) r.offsets[size_t(e) + 1] += r.offsets[size_t(e)];
  r.n_exp = r.offsets[size_t(routes) - 1];
  return r;
}

TEST(GpuOps, TopOneRoutesAndTheStableSortByRoute) {
  for (const int n : {1, 2, 3, 257, 1000}) {  // 257 and 1000: more than one sorting chunk
    const int routes = 5;
    const Routing r = make_routing(n, routes);
    DeviceBuffer<float> dprobs(r.probs), dbiases(r.biases);
    DeviceBuffer<int32_t> droute(static_cast<size_t>(n)), dorder(static_cast<size_t>(n)),
        doffsets(size_t(routes) + 1);
    cuda::top1_routes(droute.get(), dprobs.get(), dbiases.get(), n, routes);
    EXPECT_EQ(droute.download(), r.route) << n << " tokens";
    cuda::sort_by_route(dorder.get(), doffsets.get(), droute.get(), n, routes);
    EXPECT_EQ(dorder.download(), r.order) << n << " tokens";
    EXPECT_EQ(doffsets.download(), r.offsets) << n << " tokens";
  }
}

TEST(GpuOps, GatherCombineAndScatterWithTheSkipRoute) {
  for (const int n : {1, 2, 3, 97}) {
    const int routes = 4, E = 40;
    const Routing r = make_routing(n, routes);
    const Floats x = random_floats(size_t(n) * E, 75);
    const Floats y = random_floats(size_t(r.n_exp) * E, 76);
    // Host reference, from model/moe.cpp's definitions.
    Floats xg(size_t(r.n_exp) * E), out(size_t(n) * E);
    for (int i = 0; i < r.n_exp; ++i)
      std::copy_n(x.begin() + size_t(r.order[size_t(i)]) * E, E, xg.begin() + size_t(i) * E);
    const Floats dout = random_floats(out.size(), 77);
    Floats dprobs(size_t(n) * routes, 0.0f), dy(size_t(r.n_exp) * E),
        dx = random_floats(size_t(n) * E, 78);
    const Floats dx_start = dx;
    for (int i = 0; i < n; ++i) {
      const int t = r.order[size_t(i)];
      const float gate = r.probs[size_t(t) * routes + size_t(r.route[size_t(t)])];
      const float* src = i < r.n_exp ? y.data() + size_t(i) * E : x.data() + size_t(t) * E;
      double dot = 0.0;
      for (int j = 0; j < E; ++j) {
        out[size_t(t) * E + j] = gate * src[j];
        dot += double(dout[size_t(t) * E + j]) * src[j];
        if (i < r.n_exp)
          dy[size_t(i) * E + j] = gate * dout[size_t(t) * E + j];
        else
          dx[size_t(t) * E + j] += gate * dout[size_t(t) * E + j];
      }
      dprobs[size_t(t) * routes + size_t(r.route[size_t(t)])] = float(dot);
    }
    Floats dx_scattered = dx;  // then the experts' input gradient goes back to token order
    const Floats dxg = random_floats(xg.size(), 79);
    for (int i = 0; i < r.n_exp; ++i)
      for (int j = 0; j < E; ++j)
        dx_scattered[size_t(r.order[size_t(i)]) * E + j] += dxg[size_t(i) * E + j];

    DeviceBuffer<float> dx_(x), dy_(y), dprobs_(r.probs), dxg_(xg.size()), dout_(out.size()),
        ddout(dout), ddprobs(dprobs.size()), ddy(dy.size()), ddx(dx_start), ddxg(dxg);
    DeviceBuffer<int32_t> droute(r.route), dorder(r.order);
    ddprobs.zero();
    cuda::gather_rows(dxg_.get(), dx_.get(), dorder.get(), r.n_exp, E);
    EXPECT_TRUE(elementwise_close(dxg_.download(), xg, Tolerance{}))
        << "gather, " << n << " tokens";
    cuda::moe_combine_forward(dout_.get(), dy_.get(), dx_.get(), dprobs_.get(), droute.get(),
                              dorder.get(), n, r.n_exp, E, routes);
    EXPECT_TRUE(elementwise_close(dout_.download(), out, kTolerance)) << n << " tokens";
    cuda::moe_combine_backward(ddprobs.get(), ddy.get(), ddx.get(), ddout.get(), dy_.get(),
                               dx_.get(), dprobs_.get(), droute.get(), dorder.get(), n, r.n_exp, E,
                               routes);
    EXPECT_TRUE(elementwise_close(ddprobs.download(), dprobs, kTolerance)) << n << " tokens";
    EXPECT_TRUE(elementwise_close(ddy.download(), dy, kTolerance)) << n << " tokens";
    EXPECT_TRUE(elementwise_close(ddx.download(), dx, kTolerance)) << n << " tokens";
    cuda::scatter_add_rows(ddx.get(), ddxg.get(), dorder.get(), r.n_exp, E);
    EXPECT_TRUE(elementwise_close(ddx.download(), dx_scattered, kTolerance)) << n << " tokens";
  }
}

TEST(GpuOps, GroupedExpertProductsWithAnEmptyExpert) {
  const int k = 24, m = 36, groups = 3;
  const std::vector<int> offsets = {0, 5, 5, 12};  // expert 1 gets no token
  const int rows = offsets.back();
  const Floats in = random_floats(size_t(rows) * k, 80), dout = random_floats(size_t(rows) * m, 81);
  std::vector<Floats> w, dw;
  std::vector<DeviceBuffer<float>> dw_dev, w_dev;
  for (int g = 0; g < groups; ++g) {
    w.push_back(random_floats(size_t(m) * k, 82 + uint32_t(g)));
    dw.push_back(random_floats(size_t(m) * k, 90 + uint32_t(g)));
    w_dev.emplace_back(w.back());
    dw_dev.emplace_back(dw.back());
  }
  std::vector<const float*> wp;
  std::vector<float*> dwp;
  std::vector<WeightRef> wp_dev;
  std::vector<GradRef> dwp_dev;
  for (int g = 0; g < groups; ++g) {
    wp.push_back(w[size_t(g)].data());
    dwp.push_back(dw[size_t(g)].data());
    wp_dev.push_back(w_dev[size_t(g)].get());
    dwp_dev.push_back(dw_dev[size_t(g)].get());
  }
  Floats out(size_t(rows) * m), din = random_floats(in.size(), 99);
  DeviceBuffer<float> din_dev(din), in_dev(in), out_dev(out.size()), dout_dev(dout);
  cpu::grouped_matmul_forward(out.data(), in.data(), wp.data(), offsets.data(), groups, k, m);
  cpu::grouped_matmul_backward(din.data(), dwp.data(), dout.data(), in.data(), wp.data(),
                               offsets.data(), groups, k, m);
  cuda::grouped_matmul_forward(out_dev.get(), in_dev.get(), wp_dev.data(), offsets.data(), groups,
                               k, m);
  cuda::grouped_matmul_backward(din_dev.get(), dwp_dev.data(), dout_dev.get(), in_dev.get(),
                                wp_dev.data(), offsets.data(), groups, k, m);
  EXPECT_TRUE(elementwise_close(out_dev.download(), out, kTolerance));
  EXPECT_TRUE(elementwise_close(din_dev.download(), din, kTolerance));
  for (int g = 0; g < groups; ++g)
    EXPECT_TRUE(elementwise_close(dw_dev[size_t(g)].download(), dw[size_t(g)], kTolerance))
        << "expert " << g << (g == 1 ? " (no token: its gradient must stay as it was)" : "");
}

// The embedding: the gather, and the backward against cpu::embedding_backward bitwise. Each table
// element sees the same additions in the same (token) order on both, whether the GPU sorts the
// tokens by id (CUB) or walks them per column: repeated tokens, a table with non-zero values
// (the backward adds), 1, 2, 3 and many rows, a small vocabulary (every id repeats) and a large
// one.
TEST(GpuOps, EmbeddingForwardAndBackward) {
  for (const int vocab : {5, 3000})
    for (const int n : {1, 2, 3, 37, 5000}) {
      const int e = 96;
      Ints tokens(static_cast<size_t>(n));
      std::mt19937 g(uint32_t(n * 7 + vocab));
      for (int32_t& t : tokens) t = int32_t(g() % uint32_t(vocab));
      const Floats table = random_floats(size_t(vocab) * e, 101),
                   dy = random_floats(size_t(n) * e, 102);
      Floats out(size_t(n) * e), dtable = random_floats(table.size(), 103);
      DeviceBuffer<float> dtab(table), dout(out.size()), ddy(dy), ddtable(dtable);
      DeviceBuffer<int32_t> dtok(tokens);
      cpu::embedding_forward(out.data(), table.data(), tokens.data(), n, e);
      cuda::embedding_forward(dout.get(), dtab.get(), dtok.get(), n, e);
      EXPECT_EQ(dout.download(), out) << n << " tokens of " << vocab;
      cpu::embedding_backward(dtable.data(), dy.data(), tokens.data(), n, e, vocab);
      cuda::embedding_backward(ddtable.get(), ddy.get(), dtok.get(), n, e, vocab);
      EXPECT_EQ(ddtable.download(), dtable) << n << " tokens of " << vocab;
    }
}

}  // namespace
}  // namespace zaya
