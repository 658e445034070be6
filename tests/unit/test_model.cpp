// The whole ZAYA1 stack: parameter registry facts, finite-difference gradients of every tensor,
// determinism, and input validation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "backend/cpu/loss.h"
#include "core/error.h"
#include "model/config.h"
#include "model/model_info.h"
#include "model/params.h"
#include "model/zaya_model.h"

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

// Perturbs every parameter away from its trivial init so that no gradient is zero by accident.
void randomise(ZayaModel& m, uint64_t seed) {
  m.params().init(seed);
  std::mt19937 g{uint32_t(seed)};
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (const auto& s : m.params().registry().specs()) {
    float* p = m.params().weights() + s.offset;
    for (int64_t k = 0; k < s.numel; ++k) {
      if (s.name == "model.embed_tokens.weight")
        p[k] = n(g);
      else if (s.init == InitKind::Ones)
        p[k] = 1.0f + 0.2f * n(g);
      else if (s.init == InitKind::Zeros)
        p[k] = 0.05f * n(g);
      else if (s.init == InitKind::SkipBias)
        p[k] = 0.0f;
      else if (s.init == InitKind::Normal)
        p[k] = n(g) * 0.5f / std::sqrt(float(s.shape.back()));
    }
  }
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

// For every tensor T: the directional derivative along a random direction v_T, from backward()
// (Σ g·v) and from central differences of the loss (eps 1e-3 per element, loss from fp32
// logits accumulated in double). A direction that flips a route is not differentiable; the
// test then retries with a smaller step. Tolerance: 2 % of |Σ g·v| plus the fp32 noise floor
// of the loss difference (~1e-5 / eps).
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
  const Batch b = random_batch(c, 2, GetParam(), 3 + GetParam());
  m.forward(b.tokens, b.targets, b.B, b.S);
  std::vector<std::vector<int32_t>> routes;
  for (int i = 1; i < c.num_stages; i += 2) {
    auto r = m.routes(i);
    routes.emplace_back(r.begin(), r.end());
  }
  m.params().zero_grads();
  m.backward();
  std::vector<float> grads(m.params().grads(), m.params().grads() + m.params().size());
  float* w = m.params().weights();
  std::mt19937 g(99);
  std::normal_distribution<float> n(0.0f, 1.0f);
  auto same_routes = [&] {
    for (int i = 1, k = 0; i < c.num_stages; i += 2, ++k) {
      auto r = m.routes(i);
      if (!std::equal(r.begin(), r.end(), routes[k].begin())) return false;
    }
    return true;
  };
  for (const auto& s : m.params().registry().specs()) {
    if (!s.trainable()) continue;
    std::vector<float> v(s.numel), saved(w + s.offset, w + s.offset + s.numel);
    double analytic = 0.0;
    for (int64_t k = 0; k < s.numel; ++k) {
      v[k] = n(g);
      analytic += double(grads[s.offset + k]) * v[k];
    }
    bool checked = false;
    for (double eps = 1e-3; eps >= 1e-5 && !checked; eps /= 4) {
      auto loss_at = [&](double sign) {
        for (int64_t k = 0; k < s.numel; ++k) w[s.offset + k] = float(saved[k] + sign * eps * v[k]);
        const double l = m.forward(b.tokens, b.targets, b.B, b.S);
        return std::make_pair(l, same_routes());
      };
      const auto [lp, ok_p] = loss_at(1.0);
      const auto [lm, ok_m] = loss_at(-1.0);
      std::copy(saved.begin(), saved.end(), w + s.offset);
      if (!ok_p || !ok_m) continue;
      const double numeric = (lp - lm) / (2 * eps);
      EXPECT_NEAR(analytic, numeric, 0.02 * std::abs(analytic) + 2e-5 / eps)
          << s.name << " at S=" << b.S;
      checked = true;
    }
    EXPECT_TRUE(checked) << s.name << ": every step size flipped a route";
  }
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

TEST(ZayaModel, CausalLogitsDoNotSeeTheFuture) {
  const ModelConfig c = tiny();
  ZayaModel m(c);
  randomise(m, 4);
  Batch b = random_batch(c, 1, 12, 9);
  m.forward(b.tokens, {}, 1, 12);
  std::vector<float> before(m.logits().begin(), m.logits().end());
  b.tokens[7] = (b.tokens[7] + 1) % int32_t(c.vocab_size);
  m.forward(b.tokens, {}, 1, 12);
  const size_t V = size_t(c.vocab_size);
  for (size_t i = 0; i < 7 * V; ++i) ASSERT_EQ(before[i], m.logits()[i]) << "position " << i / V;
  bool changed = false;
  for (size_t i = 7 * V; i < 8 * V; ++i) changed |= before[i] != m.logits()[i];
  EXPECT_TRUE(changed);
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
