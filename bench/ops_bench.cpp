// Microbenchmarks of the CPU ops at the small config's shapes (Google Benchmark).
// Run: ./build/zaya_bench_ops [--benchmark_filter=Attention]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/conv.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/matmul.h"

namespace {

std::vector<float> random_vector(size_t n) {
  std::mt19937 g(1);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

constexpr size_t kLineFloats = 64 / sizeof(float);

// The first float of v at a 64-byte cache line (v holds kLineFloats spare floats for it).
const float* at_a_line(const std::vector<float>& v) {
  const size_t past = reinterpret_cast<uintptr_t>(v.data()) % 64 / sizeof(float);
  return v.data() + (kLineFloats - past) % kLineFloats;
}

// Tokens × in → out, as in a linear layer; reports FLOP/s.
void BM_MatmulForward(benchmark::State& state) {
  const int n = int(state.range(0)), k = int(state.range(1)), m = int(state.range(2));
  const auto in = random_vector(size_t(n) * k), w = random_vector(size_t(m) * k);
  std::vector<float> out(size_t(n) * m);
  for (auto _ : state) zaya::cpu::matmul_forward(out.data(), in.data(), w.data(), nullptr, n, k, m);
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * n * k * m, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_MatmulForward)->Args({2048, 256, 320})->Args({2048, 256, 4096})->UseRealTime();

void BM_Attention(benchmark::State& state) {
  const int B = 8, S = int(state.range(0)), nq = 4, nk = 2, d = 32;
  const bool backward = state.range(1) != 0;
  const auto q = random_vector(size_t(B) * S * nq * d), k = random_vector(size_t(B) * S * nk * d),
             v = random_vector(size_t(B) * S * nk * d), dout = random_vector(q.size());
  std::vector<float> out(q.size()), lse(size_t(B) * nq * S), dq(q.size()), dk(k.size()),
      dv(v.size());
  zaya::cpu::attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), B, S, nq, nk,
                               d, 0.17f);
  for (auto _ : state) {
    if (backward) {
      zaya::cpu::attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), out.data(),
                                    lse.data(), q.data(), k.data(), v.data(), B, S, nq, nk, d,
                                    0.17f);
    } else {
      zaya::cpu::attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), B, S, nq,
                                   nk, d, 0.17f);
    }
  }
  state.counters["tokens/s"] =
      benchmark::Counter(double(B) * S, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Attention)->ArgsProduct({{256, 1024}, {0, 1}})->UseRealTime();

void BM_GroupedConv(benchmark::State& state) {
  const int B = 8, S = 256, C = 192, G = 32;
  const auto a = random_vector(size_t(B) * (S + 1) * C), w = random_vector(size_t(C) * G * 2),
             bias = random_vector(C);
  std::vector<float> z(size_t(B) * S * C);
  for (auto _ : state)
    zaya::cpu::grouped_conv_forward(z.data(), a.data(), w.data(), bias.data(), B, S, C, G);
  state.counters["tokens/s"] =
      benchmark::Counter(double(B) * S, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_GroupedConv)->UseRealTime();

// The decode step's batch-invariant products (rows_matmul_forward) on this CPU's chosen vector path
// (or --vector-path's: ZAYA_VECTOR_PATH), at the small config's shapes: rows × in → out. Reports
// FLOP/s and the bytes of weights read per second (each call reads every weight once).
void BM_RowsMatmul(benchmark::State& state) {
  const int n = int(state.range(0)), k = int(state.range(1)), m = int(state.range(2));
  const zaya::CpuBackend be;
  // Enough copies of the weights to pass 64 MB, taken in turn: each call reads its weights from
  // memory, as a decode step does (the small model's 32 MB do not stay in this machine's cache).
  // Each copy and the input start at a cache line, as the model's weights (model/params.h) and a
  // decode step's activations do: 16 bytes past one (a std::vector's start) every second AVX2
  // load and every AVX-512 load touch two lines, a fifth slower (docs/cpu-paths.md, stop 56).
  const size_t copies = std::max<size_t>(1, (size_t(64) << 20) / (sizeof(float) * m * k));
  const size_t stride = (size_t(m) * k + kLineFloats - 1) / kLineFloats * kLineFloats;
  const auto in = random_vector(size_t(n) * k + kLineFloats),
             w = random_vector(copies * stride + kLineFloats);
  std::vector<float> out(size_t(n) * m);
  size_t turn = 0;
  for (auto _ : state) {
    const float* wc = at_a_line(w) + (turn++ % copies) * stride;
    be.rows_matmul_forward(out.data(), at_a_line(in), wc, nullptr, n, k, m);
  }
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * n * k * m, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["weight B/s"] =
      benchmark::Counter(4.0 * k * m, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(be.name());
}
// The LM head at batch 1 and 16, an expert's two products at 2 rows (batch 16 over 8 experts), the
// attention input projection at 16.
BENCHMARK(BM_RowsMatmul)
    ->Args({1, 256, 4096})
    ->Args({16, 256, 4096})
    ->Args({2, 256, 512})
    ->Args({2, 256, 256})
    ->Args({16, 256, 320})
    ->UseRealTime();

// The decode step's attention over a paged cache (kv_attention_partials) at the small config's
// shapes: 16 rows of `context` positions, 4 query heads over 2 key heads of 32, blocks of 16
// positions laid out as the decoder's pool lays them out (4 attention stages interleaved, each
// row's blocks scattered). Pools taken in turn pass 64 MB, so the cache is read from memory, as in
// a decode step, where the experts' weights pass through the caches between attention stages;
// with a second argument of 1, one pool, read from the caches (the kernel's own speed).
void BM_KvAttention(benchmark::State& state) {
  const int n = 16, nq = 4, nk = 2, d = 32, bs = 16, stages = 4;
  const int context = int(state.range(0)), per_row = (context + bs - 1) / bs;
  const int Dk = nk * d, blocks = n * per_row;
  const size_t pool_floats = size_t(blocks) * stages * 2 * bs * Dk;
  const bool in_cache = state.range(1) != 0;  // one pool, read from the caches after the first call
  const size_t copies =
      in_cache ? 1 : std::max<size_t>(1, (size_t(64) << 20) / (sizeof(float) * pool_floats));
  const auto pool = random_vector(copies * pool_floats), q = random_vector(size_t(n) * nq * d);
  std::vector<int32_t> table(size_t(n) * per_row), counts(size_t(n) * per_row);
  std::mt19937 g(2);
  std::vector<int32_t> order(static_cast<size_t>(blocks));
  for (int i = 0; i < blocks; ++i) order[size_t(i)] = i;
  std::shuffle(order.begin(), order.end(), g);
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < per_row; ++i) {
      table[size_t(r * per_row + i)] = order[size_t(r * per_row + i)];
      counts[size_t(r * per_row + i)] = std::min(bs, context - i * bs);
    }
  std::vector<float> mx(size_t(n) * nq), sum(size_t(n) * nq), out(size_t(n) * nq * d);
  std::vector<float> scores(size_t(n) * nq * per_row * bs);
  const zaya::CpuBackend be;
  size_t turn = 0;
  for (auto _ : state) {
    zaya::PagedKv kv;
    const size_t stage = turn % stages, copy = turn++ % copies;
    kv.keys = pool.data() + copy * pool_floats + stage * 2 * bs * Dk;
    kv.block_stride = int64_t(stages) * 2 * bs * Dk;
    kv.values_offset = int64_t(bs) * Dk;
    kv.blocks = table.data();
    kv.counts = counts.data();
    kv.max_blocks = per_row;
    kv.block_size = bs;
    be.kv_attention_partials(mx.data(), sum.data(), out.data(), scores.data(), q.data(), kv, n, nq,
                             nk, d);
  }
  state.counters["cache B/s"] = benchmark::Counter(double(n) * context * 2 * Dk * sizeof(float),
                                                   benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(be.name());
}
BENCHMARK(BM_KvAttention)->Args({144, 0})->Args({144, 1})->Args({1024, 0})->UseRealTime();

}  // namespace

BENCHMARK_MAIN();

// The decode step's row-wise ops at batch 16 of the small config, in cache: the residual merge
// and RMSNorm over the hidden size, SwiGLU over an expert's rows, GELU over the router's. These
// run on the calling thread (below worth_threads) hundreds of times a step, so a call's fixed
// cost shows here.
void BM_DecodeRowOps(benchmark::State& state) {
  const int n = 16, e = 256, router = 64;
  const zaya::CpuBackend be;
  const auto in = random_vector(size_t(n) * e * 2), other = random_vector(size_t(n) * e);
  const auto w = random_vector(size_t(e) * 4);
  std::vector<float> out(size_t(n) * e * 2);
  const char* names[] = {"residual_merge", "rmsnorm", "swiglu", "gelu"};
  const int op = int(state.range(0));
  for (auto _ : state) {
    if (op == 0)
      be.residual_merge_forward(out.data(), in.data(), w.data(), w.data() + e, other.data(),
                                w.data() + 2 * e, w.data() + 3 * e, n, e);
    if (op == 1) be.rmsnorm_forward(out.data(), nullptr, in.data(), w.data(), n, e, 1e-5f);
    if (op == 2) be.swiglu_forward(out.data(), in.data(), n, e);
    if (op == 3) be.gelu_forward(out.data(), in.data(), long(n) * router);
  }
  state.SetLabel(std::string(names[op]) + ", " + be.name());
}
BENCHMARK(BM_DecodeRowOps)->DenseRange(0, 3)->UseRealTime();

// CCA's decode convolution (cca_decode_conv) at batch 16 of the small config: 4 query and 2 key
// heads of 32, each row's state a row of a 64-slot window.
void BM_CcaDecodeConv(benchmark::State& state) {
  const int n = 16, nq = 4, nk = 2, d = 32, C = (nq + nk) * d, P = C + nk * d, slots = 64;
  const auto proj = random_vector(size_t(n) * P), window = random_vector(size_t(slots) * 2 * C);
  const auto conv0_w = random_vector(size_t(C) * 2), conv0_b = random_vector(size_t(C));
  const auto conv1_w = random_vector(size_t(C) * 2 * d), conv1_b = random_vector(size_t(C));
  std::vector<int32_t> slot(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) slot[size_t(r)] = (7 * r + 3) % slots;
  zaya::CcaDecodeStep s;
  s.n = n;
  s.nq = nq;
  s.nk = nk;
  s.d = d;
  s.conv0_w = conv0_w.data();
  s.conv0_b = conv0_b.data();
  s.conv1_w = conv1_w.data();
  s.conv1_b = conv1_b.data();
  std::vector<float> z(size_t(n) * C);
  const zaya::CpuBackend be;
  for (auto _ : state) be.cca_decode_conv(z.data(), proj.data(), window.data(), slot.data(), s);
  state.SetLabel(be.name());
}
BENCHMARK(BM_CcaDecodeConv)->UseRealTime();
