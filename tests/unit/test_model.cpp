// The whole ZAYA1 stack: parameter registry facts, finite-difference gradients of every tensor,
// determinism, and input validation.
#include <gtest/gtest.h>

#include <omp.h>
#include "test_util.h"

#include <cmath>
#include <cstring>
#include <random>
#include <span>

#include "backend/cpu/loss.h"
#include "core/error.h"
#include "core/rng.h"
#include "model/config.h"
#include "model/model_info.h"
#include "model/params.h"
#include "model/zaya_model.h"
#include "optim/optimizer.h"

namespace zaya {
namespace {

ModelConfig tiny() {
  return load_model_config(ZAYA_SOURCE_DIR "/configs/tiny.json");
}

TEST(ParamRegistry, Zaya1BaseCountsMatchThePublishedModel) {
  const ModelConfig c = load_model_config(ZAYA_SOURCE_DIR "/configs/zaya1-base.json");
  const ModelInfo m = compute_model_info(c, 4096);
  EXPECT_EQ(m.total_params, 8840488784);
  EXPECT_EQ(m.non_embedding_params, 8303355728);
  EXPECT_NEAR(double(m.active_non_embedding) / 1e6, 753.6, 0.05);
  EXPECT_EQ(m.kv_cache_values_per_token * 2, 40 * 1024);  // 40 KiB per token in bf16
}

TEST(ParamRegistry, SixStageModelHoldsTheZyphraTensorList) {
  ModelConfig c = tiny();
  const ParamRegistry reg(c);
  int trained = 0, buffers = 0;
  for (const auto& s : reg.specs()) (s.trainable() ? trained : buffers)++;
  EXPECT_EQ(trained, 114);
  EXPECT_EQ(buffers, 3);
  EXPECT_EQ(reg.get("model.layers.0.self_attn.qkv.linear_q.weight").shape,
            (Shape{c.q_dim(), c.hidden_size}));
  EXPECT_EQ(reg.get("model.layers.0.self_attn.qkv.conv_qk.1.weight").shape,
            (Shape{c.conv_channels(), c.head_dim, 2}));
  EXPECT_EQ(reg.get("model.layers.1.zaya_block.router.router_mlp.4.weight").shape,
            (Shape{c.num_routes(), c.router_dim}));
  EXPECT_EQ(reg.find("model.layers.1.zaya_block.router.router_states_scale"), nullptr);
  EXPECT_NE(reg.find("model.layers.3.zaya_block.router.router_states_scale"), nullptr);
  EXPECT_EQ(reg.find("model.layers.0.res_scale.residual_scale"), nullptr);
  EXPECT_NE(reg.find("model.layers.1.res_scale.residual_scale"), nullptr);
  EXPECT_EQ(reg.get("model.layers.1.zaya_block.experts.local_experts.2.linear_fc1.weight").group,
            OptimGroup::Muon);
  EXPECT_EQ(reg.get("model.layers.0.self_attn.qkv.conv_qk.0.weight").group, OptimGroup::AdamW);
  EXPECT_EQ(reg.get("model.layers.0.self_attn.qkv.temp").group, OptimGroup::AdamW);
  EXPECT_EQ(reg.get("model.embed_tokens.weight").group, OptimGroup::AdamW);
  EXPECT_EQ(reg.get("model.layers.1.zaya_block.router.balancing_biases").group, OptimGroup::Buffer);
}

// Every tensor starts at a multiple of kParamAlignFloats (a cache line; a bf16 copy of a weight
// 32-byte aligned, as cuBLASLt's fast kernels need), except the CCA projections, which follow
// linear_q directly to form one matrix; nothing overlaps and the padding stays under the alignment.
// Before the alignment, ZAYA1-base's experts started one float past a multiple of 8 (the 17
// balancing biases), and the GPU's bf16 products read them through 2-byte aligned kernels.
TEST(ParamRegistry, EveryTensorStartsAlignedExceptTheFusedProjections) {
  for (const char* name : {"tiny.json", "small.json", "zaya1-base.json"}) {
    const ParamRegistry reg(load_model_config(std::string(ZAYA_SOURCE_DIR "/configs/") + name));
    size_t end = 0, padding = 0;
    for (const ParamSpec& s : reg.specs()) {
      const bool fused = s.name.find("qkv.linear_k") != std::string::npos ||
                         s.name.find("qkv.val_proj") != std::string::npos;
      if (fused) {
        EXPECT_EQ(s.offset, end) << name << ": " << s.name;
      } else {
        EXPECT_EQ(s.offset % kParamAlignFloats, 0u) << name << ": " << s.name;
        EXPECT_GE(s.offset, end) << name << ": " << s.name;
        EXPECT_LT(s.offset - end, kParamAlignFloats) << name << ": " << s.name;
        padding += s.offset - end;
      }
      end = s.offset + size_t(s.numel);
    }
    EXPECT_EQ(end, reg.total_floats()) << name;
    if (std::string(name) == "zaya1-base.json") {
      EXPECT_GT(padding, 0u) << "ZAYA1-base has tensors of odd sizes: padding expected";
    }
  }
}

TEST(ParamStore, InitIsAPureFunctionOfSeedAndName) {
  ParamStore a(tiny()), b(tiny()), c(tiny());
  a.init(5);
  b.init(5);
  c.init(6);
  EXPECT_EQ(std::memcmp(a.weights(), b.weights(), a.size() * 4), 0);
  EXPECT_NE(std::memcmp(a.weights(), c.weights(), a.size() * 4), 0);
  const float* bb = b.weight_ptr("model.layers.1.zaya_block.router.balancing_biases");
  EXPECT_EQ(bb[0], 0.0f);
  EXPECT_EQ(bb[tiny().num_experts], -1.0f);  // the skip route starts at −1
}

// The initialisation runs on every thread (the depth-8 config's 1.4 billion values took a minute
// on one): its values may not depend on the thread count. small.json's embedding and experts are
// large enough to be split between threads.
TEST(ParamStore, InitDoesNotDependOnTheThreadCount) {
  const ModelConfig c = load_model_config(ZAYA_SOURCE_DIR "/configs/small.json");
  const int saved = omp_get_max_threads();
  ParamStore one(c), three(c);
  omp_set_num_threads(1);
  one.init(7);
  omp_set_num_threads(3);
  three.init(7);
  omp_set_num_threads(saved);
  EXPECT_EQ(std::memcmp(one.weights(), three.weights(), one.size() * 4), 0);
  // Each value is Philox's for its tensor and index: element 70,000 of the embedding (a slice
  // a second thread computes) is the generator's value at that index.
  const ParamSpec& e = one.registry().get("model.embed_tokens.weight");
  ASSERT_GT(e.numel, 140000);
  const Philox rng(7, hash_name(e.name.c_str()));
  EXPECT_EQ(three.weights()[e.offset + 70000], e.init_scale * rng.normal(70000));
}

// Perturbs every parameter away from its trivial init so that no gradient is zero by accident.
void randomise(ZayaModel& m, uint64_t seed) {
  test::randomise_weights(m.params(), seed, uint32_t(seed));
}

struct Batch {
  int B, S;
  std::vector<int32_t> tokens, targets;
};

Batch random_batch(const ModelConfig& c, int B, int S, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int32_t> tok(0, int32_t(c.vocab_size) - 1);
  Batch b{B, S, std::vector<int32_t>(size_t(B) * S), std::vector<int32_t>(size_t(B) * S)};
  for (auto& t : b.tokens) t = tok(g);
  for (size_t i = 0; i < b.targets.size(); ++i)
    b.targets[i] = i % 5 == 4 ? cpu::kIgnoreIndex : tok(g);  // some ignored positions
  return b;
}

class ModelGradient : public ::testing::TestWithParam<int> {};

// The mean cross-entropy of the model's fp32 logits, summed here in double: the model's own loss is
// returned as a float, whose rounding (2^-24 of ~3) would be the largest noise in a finite
// difference.
double loss_in_double(ZayaModel& m, const Batch& b) {
  m.forward(b.tokens, b.targets, b.B, b.S);
  const std::span<const float> logits = m.logits();
  const size_t V = size_t(m.config().vocab_size);
  double sum = 0;
  int count = 0;
  for (size_t i = 0; i < b.targets.size(); ++i) {
    if (b.targets[i] == cpu::kIgnoreIndex) continue;
    const float* row = logits.data() + i * V;
    double top = row[0], z = 0;
    for (size_t j = 1; j < V; ++j) top = std::max(top, double(row[j]));
    for (size_t j = 0; j < V; ++j) z += std::exp(double(row[j]) - top);
    sum += top + std::log(z) - double(row[size_t(b.targets[i])]);
    ++count;
  }
  return sum / count;
}

// For every tensor T, directional derivatives from backward() against central differences of the
// loss, along two directions of T's own scale (entries ~ the RMS of T's weights): a random one
// (N(0, 1) entries), which a gradient that is missing or zero would fail, and the gradient's own
// direction, where the derivative is largest (|g|·|v|) and so stands furthest above the noise.
// With w± the weights actually stored after w ± h·v (fp32 rounding included), backward's
// Σ g·(w+ − w−) is compared with L(w+) − L(w−); the loss is summed in double from the fp32 logits.
// Top-1 routing is not differentiable at a tie, and backward() treats the routes as constants, so
// the finite differences hold the routes of the unperturbed forward (ZayaModel::hold_routes); the
// gates still move with the weights.
//
// Limits, for every tensor and direction: |analytic − numeric| <= 2e-3·|numeric| + 4δ/h.
// - The step h is 3 % of the tensor's scale, or smaller where the loss would move by more than
//   2e-3 (steep directions, the gradient's above all), and Richardson extrapolation over h and h/2
//   ((4·D(h/2) − D(h)) / 3) removes the central difference's O(h²) term: what is left, O(h⁴), was
//   measured at <= 1e-3 of the derivative on this model (without the extrapolation, up to 2e-2).
// - The floor is the loss's fp32 noise: the same loss at weights a few % apart differs from a
//   smooth function by δ ≈ 1.5e-6 (a few ulp of L ≈ 3, from the fp32 forward, measured), and the
//   extrapolated difference carries ≈ 2δ/h of it; the floor is twice that, 2e-4 at h = 3 %, and
//   never more than 3e-3 of the derivative where the step was cut to move the loss by 2e-3. (The
//   previous check's floor, 2e-5 / eps = 0.02, was above most router tensors' derivatives, 1e-5 –
//   1e-3 along a random direction: a sign flipped in the gradient of the router's RMSNorm passed
//   it, and fails this one at every sequence length.)
TEST_P(ModelGradient, EveryTensorMatchesFiniteDifferences) {
  ModelConfig c = tiny();
  c.hidden_size = 32;
  c.head_dim = 4;
  c.num_q_heads = 4;
  c.expert_hidden = 8;
  c.router_dim = 8;
  c.vocab_size = 23;
  ZayaModel m(c);
  randomise(m, 11 + GetParam());
  const Batch b = random_batch(c, 8, GetParam(), 3 + GetParam());  // 8 rows: less noise
  m.forward(b.tokens, b.targets, b.B, b.S);
  std::vector<std::vector<int32_t>> routes;
  for (int i = 1; i < c.num_stages; i += 2) {
    auto r = m.routes(i);
    routes.emplace_back(r.begin(), r.end());
  }
  m.params().zero_grads();
  m.backward();
  std::vector<float> grads(m.params().grads(), m.params().grads() + m.params().size());
  m.hold_routes(routes);
  float* w = m.params().weights();
  std::mt19937 g(99);
  std::normal_distribution<double> n(0.0, 1.0);
  constexpr double kStep = 3e-2, kMove = 2e-3, kRtol = 2e-3, kLossNoise = 1.5e-6;
  int checked = 0;
  for (const auto& s : m.params().registry().specs()) {
    if (!s.trainable()) continue;
    const std::vector<float> saved(w + s.offset, w + s.offset + s.numel);
    const float* gt = grads.data() + s.offset;
    double w_rms = 0, g_rms = 0;
    for (int64_t k = 0; k < s.numel; ++k) {
      w_rms += double(saved[k]) * saved[k];
      g_rms += double(gt[k]) * gt[k];
    }
    w_rms = std::sqrt(w_rms / double(s.numel));
    g_rms = std::sqrt(g_rms / double(s.numel));
    ASSERT_GT(w_rms, 0) << s.name;  // randomise() leaves no tensor at zero
    // (analytic, numeric) derivative along v for one step h.
    auto probe = [&](const std::vector<double>& v, double h, double& analytic, double& numeric) {
      std::vector<float> plus(s.numel), minus(s.numel);
      analytic = 0;
      for (int64_t k = 0; k < s.numel; ++k) {
        plus[k] = float(saved[k] + h * v[k]);
        minus[k] = float(saved[k] - h * v[k]);
        analytic += double(gt[k]) * (double(plus[k]) - double(minus[k]));
      }
      std::copy(plus.begin(), plus.end(), w + s.offset);
      const double lp = loss_in_double(m, b);
      std::copy(minus.begin(), minus.end(), w + s.offset);
      const double lm = loss_in_double(m, b);
      analytic /= 2 * h;
      numeric = (lp - lm) / (2 * h);
    };
    auto check = [&](const std::vector<double>& v, const char* along) {
      // The step: 3 % of the tensor's scale, or less where the loss would move by more than
      // 2e-3 at first order (kept in the range where the extrapolation is exact to <= 1e-3).
      double slope = 0;
      for (int64_t k = 0; k < s.numel; ++k) slope += double(gt[k]) * v[size_t(k)];
      const double h = std::min(kStep, kMove / std::max(std::abs(slope), 1e-30));
      double a1, n1, a2, n2;
      probe(v, h, a1, n1);
      probe(v, h / 2, a2, n2);
      const double analytic = (4 * a2 - a1) / 3, numeric = (4 * n2 - n1) / 3;
      const double floor = 4 * kLossNoise / h;
      EXPECT_LE(std::abs(analytic - numeric), kRtol * std::abs(numeric) + floor)
          << s.name << " along " << along << " at S=" << b.S << ", step " << h << ": backward "
          << analytic << ", finite differences " << numeric << " (limit " << kRtol
          << "·|numeric| + " << floor << ")";
      ++checked;
    };
    std::vector<double> v(size_t(s.numel));
    for (double& x : v) x = n(g) * w_rms;
    check(v, "a random direction");
    if (g_rms > 0) {  // a zero gradient has no direction; the random one above checks it
      for (int64_t k = 0; k < s.numel; ++k) v[size_t(k)] = double(gt[k]) / g_rms * w_rms;
      check(v, "its gradient");
    }
    std::copy(saved.begin(), saved.end(), w + s.offset);
  }
  EXPECT_GE(checked, 114);  // every one of the 6-stage model's 114 trained tensors, at least once
}

// Holding routes is what the test above relies on: held routes are the routes taken, and holding
// the model's own routes changes nothing.
TEST(ZayaModel, HeldRoutesAreTaken) {
  const ModelConfig c = tiny();
  ZayaModel m(c);
  randomise(m, 5);
  const Batch b = random_batch(c, 1, 10, 2);
  const float free_loss = m.forward(b.tokens, b.targets, 1, 10);
  std::vector<std::vector<int32_t>> own, other;
  for (int i = 1; i < int(c.num_stages); i += 2) {
    own.emplace_back(m.routes(i).begin(), m.routes(i).end());
    other.push_back(own.back());
    for (auto& r : other.back()) r = (r + 1) % int32_t(c.num_experts + 1);
  }
  m.hold_routes(own);
  EXPECT_EQ(m.forward(b.tokens, b.targets, 1, 10), free_loss);
  m.hold_routes(other);
  const float other_loss = m.forward(b.tokens, b.targets, 1, 10);
  for (int i = 1, k = 0; i < int(c.num_stages); i += 2, ++k)
    EXPECT_TRUE(std::equal(other[k].begin(), other[k].end(), m.routes(i).begin()));
  EXPECT_NE(other_loss, free_loss);
  other[0][0] = int32_t(c.num_experts) + 1;
  m.hold_routes(other);
  EXPECT_THROW(m.forward(b.tokens, b.targets, 1, 10), Error);
}

INSTANTIATE_TEST_SUITE_P(SeqLens, ModelGradient, ::testing::Values(1, 2, 3, 9));

TEST(ZayaModel, ForwardBackwardIsBitwiseDeterministic) {
  const ModelConfig c = tiny();
  std::vector<float> first_grads;
  float first_loss = 0;
  for (int run = 0; run < 2; ++run) {
    ZayaModel m(c);
    randomise(m, 1);
    const Batch b = random_batch(c, 3, 40, 2);
    const float loss = m.forward(b.tokens, b.targets, b.B, b.S);
    m.params().zero_grads();
    m.backward();
    std::vector<float> gr(m.params().grads(), m.params().grads() + m.params().size());
    if (run == 0) {
      first_loss = loss;
      first_grads = gr;
    } else {
      EXPECT_EQ(std::memcmp(&loss, &first_loss, 4), 0);
      EXPECT_EQ(std::memcmp(gr.data(), first_grads.data(), gr.size() * 4), 0);
    }
  }
}

// Recomputation (set_recompute), selective (the cheap buffers between the products made again
// before each stage's backward) and full (each stage's forward run again): the same loss, routes
// and gradients, bit for bit.
TEST(ZayaModel, RecomputeGivesBitwiseTheSameGradients) {
  const ModelConfig c = tiny();
  const Batch b = random_batch(c, 2, 33, 4);
  auto run = [&](RecomputePlan recompute, float& loss, std::vector<int32_t>& routes) {
    ZayaModel m(c);
    randomise(m, 3);
    m.set_recompute(recompute);
    loss = m.forward(b.tokens, b.targets, b.B, b.S);
    routes.assign(m.routes(3).begin(), m.routes(3).end());
    if (recompute.moe != Recompute::kNone) {
      EXPECT_THROW(m.route_probs(3), Error);
    }
    m.params().zero_grads();
    m.backward();
    return std::vector<float>(m.params().grads(), m.params().grads() + m.params().size());
  };
  float want_loss = 0;
  std::vector<int32_t> want_routes;
  const std::vector<float> want = run(Recompute::kNone, want_loss, want_routes);
  // Each mode for every stage, and each kind of stage its own (train.recompute's object form).
  const RecomputePlan plans[] = {Recompute::kSelective,
                                 Recompute::kFull,
                                 {Recompute::kFull, Recompute::kSelective},
                                 {Recompute::kSelective, Recompute::kNone},
                                 {Recompute::kNone, Recompute::kFull}};
  for (const RecomputePlan& plan : plans) {
    const std::string name = recompute_plan_name(plan);
    float got_loss = 0;
    std::vector<int32_t> got_routes;
    const std::vector<float> got = run(plan, got_loss, got_routes);
    EXPECT_EQ(std::memcmp(&got_loss, &want_loss, 4), 0) << name;
    EXPECT_EQ(got_routes, want_routes) << name;
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << name;
  }
}

// The LM head and loss in blocks (no [tokens × vocab] logits) against the materialised logits:
// the loss and every parameter's gradient within 1e-6 relative (per tensor), blocks that split
// both the tokens and the vocabulary raggedly; and logits() refuses after a chunked forward.
TEST(ZayaModel, ChunkedLmHeadGivesTheMaterialisedLossAndGradients) {
  const ModelConfig c = tiny();
  const Batch b = random_batch(c, 3, 40, 2);
  auto run = [&](cpu::LmHeadChunks chunks, float& loss) {
    ZayaModel m(c);
    randomise(m, 1);
    m.set_lm_head_chunks(chunks);
    loss = m.forward(b.tokens, b.targets, b.B, b.S);
    if (chunks.enabled()) {
      EXPECT_THROW(m.logits(), Error);
    }
    m.params().zero_grads();
    m.backward();
    return std::vector<float>(m.params().grads(), m.params().grads() + m.params().size());
  };
  float want_loss = 0, got_loss = 0;
  const std::vector<float> want = run({}, want_loss);
  const std::vector<float> got = run({16, 30}, got_loss);
  EXPECT_LE(std::abs(got_loss - want_loss) / want_loss, 1e-6);
  const ParamRegistry reg(c);
  for (const auto& spec : reg.specs()) {
    if (!spec.trainable()) continue;
    double diff = 0, scale = 0;
    for (size_t i = spec.offset; i < spec.offset + size_t(spec.numel); ++i) {
      diff = std::max(diff, std::abs(double(got[i]) - double(want[i])));
      scale = std::max(scale, std::abs(double(want[i])));
    }
    EXPECT_LE(diff, 1e-6 * scale) << spec.name;
  }
}

// A run's numbers may not depend on its thread count: the trainer lowers the count while other
// work holds the CPU (train/thread_governor.h), and a run resumed on another machine may have more
// or fewer cores. One forward, backward and optimizer step (AdamW and Muon) at 1, 2 and 3 threads
// must give the same loss, gradients and weights, bit for bit. Wide enough (hidden 256, 160
// tokens) that OpenBLAS would split its products between threads: it did, and the gradients
// differed at 2 and 3 threads before every product was cut into tiles by its shape.
TEST(ZayaModel, ResultsDoNotDependOnTheThreadCount) {
  ModelConfig c = tiny();
  c.hidden_size = 256;
  c.expert_hidden = 128;
  c.head_dim = 32;
  c.vocab_size = 500;
  const int saved_threads = omp_get_max_threads();
  struct Result {
    float loss;
    std::vector<float> grads, weights;
  };
  std::vector<Result> results;
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    ZayaModel m(c);
    randomise(m, 3);
    const Batch b = random_batch(c, 4, 40, 5);
    Result r;
    r.loss = m.forward(b.tokens, b.targets, b.B, b.S);
    m.params().zero_grads();
    m.backward();
    r.grads.assign(m.params().grads(), m.params().grads() + m.params().size());
    Optimizer optimizer(m.params().registry(), OptimConfig{});
    optimizer.step(m.params(), 1e-3);
    r.weights.assign(m.params().weights(), m.params().weights() + m.params().size());
    results.push_back(std::move(r));
  }
  omp_set_num_threads(saved_threads);
  for (size_t i = 1; i < results.size(); ++i) {
    const int threads = int(i) + 1;
    EXPECT_EQ(std::memcmp(&results[i].loss, &results[0].loss, 4), 0)
        << "loss at " << threads << " threads " << results[i].loss << " vs " << results[0].loss;
    EXPECT_EQ(
        std::memcmp(results[i].grads.data(), results[0].grads.data(), results[0].grads.size() * 4),
        0)
        << "gradients differ at " << threads << " threads";
    EXPECT_EQ(std::memcmp(results[i].weights.data(), results[0].weights.data(),
                          results[0].weights.size() * 4),
              0)
        << "weights after an optimizer step differ at " << threads << " threads";
  }
}

// Exactly causal, bitwise: changing token t must leave every logit before t identical. Long enough
// (2 × 72 tokens) that experts' segments cross the GEMM row tiles; the change moves token t's
// routes, which changes every expert's segment size, the case that once leaked a future token by an
// ulp.
TEST(ZayaModel, CausalLogitsDoNotSeeTheFuture) {
  const ModelConfig c = tiny();
  ZayaModel m(c);
  randomise(m, 4);
  const int B = 2, S = 72;
  const Batch b = random_batch(c, B, S, 9);
  m.forward(b.tokens, {}, B, S);
  const std::vector<float> before(m.logits().begin(), m.logits().end());
  const size_t V = size_t(c.vocab_size);
  int route_changes = 0;
  for (int t : {1, 7, 30, 65, 71}) {
    for (int delta = 1; delta <= 3; ++delta) {
      std::vector<int32_t> tokens = b.tokens;
      tokens[size_t(S) + t] =
          (tokens[size_t(S) + t] + delta) % int32_t(c.vocab_size);  // sequence 1
      std::vector<std::vector<int32_t>> routes_before;
      m.forward(b.tokens, {}, B, S);
      for (int st = 1; st < int(c.num_stages); st += 2)  // MoE stages are the odd ones
        routes_before.emplace_back(m.routes(st).begin(), m.routes(st).end());
      m.forward(tokens, {}, B, S);
      size_t k = 0;
      for (int st = 1; st < int(c.num_stages); st += 2)
        route_changes += m.routes(st)[size_t(S) + t] != routes_before[k++][size_t(S) + t];
      const auto after = m.logits();
      // Sequence 0 and positions < t of sequence 1 are unchanged, bit for bit.
      for (size_t i = 0; i < (size_t(S) + t) * V; ++i)
        ASSERT_EQ(std::memcmp(&before[i], &after[i], sizeof(float)), 0)
            << "token " << t << " changed: logit at position " << i / V << " moved from "
            << before[i] << " to " << after[i];
      bool changed = false;
      for (size_t i = (size_t(S) + t) * V; i < (size_t(S) + t + 1) * V; ++i)
        changed |= before[i] != after[i];
      EXPECT_TRUE(changed) << "position " << t << " did not see its own token change";
    }
  }
  EXPECT_GT(route_changes, 0) << "no change moved a route: the test would not cover segment sizes";
}

TEST(ZayaModel, RejectsTokensOutsideTheVocabulary) {
  const ModelConfig c = tiny();
  ZayaModel m(c);
  std::vector<int32_t> tokens = {1, 2, int32_t(c.vocab_size)};
  try {
    m.forward(tokens, {}, 1, 3);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id 97 at position 2"), std::string::npos)
        << e.what();
  }
  tokens = {1, -1, 2};
  EXPECT_THROW(m.forward(tokens, {}, 1, 3), Error);
  EXPECT_THROW(m.forward(tokens, {}, 1, 4), Error);  // size mismatch
}

TEST(ZayaModel, LossIsMeanOverLabelledPositions) {
  const ModelConfig c = tiny();
  ZayaModel m(c);
  randomise(m, 2);
  const Batch b = random_batch(c, 2, 6, 1);
  const auto targets = ZayaModel::shifted_targets(b.tokens, 2, 6);
  const float loss = m.forward(b.tokens, targets, 2, 6);
  EXPECT_EQ(m.loss_count(), 10);
  const auto logits = m.logits();
  double sum = 0;
  const int V = int(c.vocab_size);
  for (int t = 0; t < 12; ++t) {
    if (targets[t] == cpu::kIgnoreIndex) continue;
    double mx = -1e30, z = 0;
    for (int j = 0; j < V; ++j) mx = std::max(mx, double(logits[size_t(t) * V + j]));
    for (int j = 0; j < V; ++j) z += std::exp(logits[size_t(t) * V + j] - mx);
    sum += mx + std::log(z) - logits[size_t(t) * V + targets[t]];
  }
  EXPECT_NEAR(loss, sum / 10, 1e-5);
}

}  // namespace
}  // namespace zaya
