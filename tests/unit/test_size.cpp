// zaya size: the hardware profile file, the GEMM curve interpolation, the non-GEMM rate fit, the
// step-time model and the shape rules, each against values worked out here by hand or taken from
// outside the code under test (ZAYA1-base's published counts, a constant-rate curve).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/config.h"
#include "model/model_gemms.h"
#include "sizing/hardware_profile.h"
#include "sizing/profile_measure.h"
#include "sizing/shape_search.h"
#include "sizing/step_model.h"

namespace zaya {
namespace {

// A CPU profile whose GEMM curve is `rate(m, n, k)` GFLOP/s on the 5 × 5 × 5 grid.
template <typename Rate>
HardwareProfile cpu_profile(Rate rate, int threads = 2, int ranks = 1) {
  HardwareProfile p;
  p.name = "test";
  p.cores = 2;
  p.memory_bytes = int64_t(16) << 30;
  p.runtime_bytes = 10 << 20;
  ProfileRates r;
  r.threads = threads;
  r.ranks = ranks;
  r.membw_gbs = 20;
  r.ns_per_act_byte = 0.25;
  r.ns_per_score = 2;
  r.ns_per_logit = 3;
  for (int m : {16, 64, 256, 1024, 4096})
    for (int n : {16, 64, 256, 1024, 4096})
      for (int k : {16, 64, 256, 1024, 4096}) r.gemm.push_back({m, n, k, rate(m, n, k)});
  p.rates.push_back(r);
  return p;
}

HardwareProfile flat_profile(double gflops = 50) {
  return cpu_profile([=](int, int, int) { return gflops; });
}

TEST(HardwareProfile, RoundTripsThroughItsFile) {
  HardwareProfile p = cpu_profile([](int m, int n, int k) { return 1.0 + m % 7 + n % 5 + k % 3; });
  p.comm = {2, 3.5, 1.25};
  const std::string path = ::testing::TempDir() + "/profile.json";
  write_profile(p, path);
  const HardwareProfile q = read_profile(path);
  EXPECT_EQ(q.name, p.name);
  EXPECT_EQ(q.memory_bytes, p.memory_bytes);
  ASSERT_EQ(q.rates.size(), 1u);
  EXPECT_EQ(q.rates[0].gemm.size(), 125u);
  EXPECT_EQ(q.rates[0].gemm[17].gflops, p.rates[0].gemm[17].gflops);
  EXPECT_EQ(q.rates[0].ns_per_logit, 3);
  EXPECT_EQ(q.comm.busbw_gbs, 3.5);
}

TEST(HardwareProfile, ErrorsNameTheFieldAndTheFile) {
  const nlohmann::json good = profile_to_json(flat_profile());
  auto expect_error = [&](nlohmann::json j, const std::string& what) {
    try {
      profile_from_json(j, "hw.json");
      ADD_FAILURE() << "no error for " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("hw.json"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  nlohmann::json j = good;
  j.erase("rates");
  expect_error(j, "'rates'");
  j = good;
  j["device"] = "tpu";
  expect_error(j, "'device'");
  j = good;
  j["format"] = "something";
  expect_error(j, "'format'");
  j = good;
  j["rates"][0]["membw_gbs"] = -1;
  expect_error(j, "'membw_gbs'");
  j = good;
  j["rates"][0]["gemm_m_n_k_gflops"][3] = {16, 16, 0, 5.0};
  expect_error(j, "gemm_m_n_k_gflops[3] k must be an integer");
  j = good;
  j["rates"][0]["gemm_m_n_k_gflops"].erase(5);
  const HardwareProfile broken = profile_from_json(j, "hw.json");  // parses; the grid is checked
  EXPECT_THROW(gemm_seconds(broken, broken.rates[0], 64, 64, 64), Error);
}

TEST(HardwareProfile, GemmCurveInterpolatesInLogSpace) {
  // Rate ∝ m^0.5 (in log space: linear in log m), so interpolation is exact between points.
  const HardwareProfile p = cpu_profile([](int m, int, int) { return std::sqrt(double(m)); });
  const ProfileRates& r = p.rates[0];
  auto rate = [&](int64_t m, int64_t n, int64_t k) {
    return 2.0 * m * n * k / gemm_seconds(p, r, m, n, k) * 1e-9;
  };
  EXPECT_NEAR(rate(64, 256, 1024), 8.0, 1e-9);  // a grid point
  EXPECT_NEAR(rate(128, 256, 1024), std::sqrt(128.0), 1e-9);
  EXPECT_NEAR(rate(100, 300, 17), 10.0, 1e-9);
  EXPECT_NEAR(rate(8192, 64, 64), 64.0, 1e-9);  // clamped to the largest measured m
  EXPECT_NEAR(rate(4, 64, 64), 4.0, 1e-9);      // and to the smallest
  // count multiplies on a CPU.
  EXPECT_DOUBLE_EQ(gemm_seconds(p, r, 64, 64, 64, 7), 7 * gemm_seconds(p, r, 64, 64, 64));
}

TEST(HardwareProfile, PicksTheRatesOfTheThreadsAndRanks) {
  HardwareProfile p = flat_profile();
  p.rates[0].threads = 1;
  p.rates.push_back(p.rates[0]);
  p.rates.back().threads = 4;
  p.rates.push_back(p.rates[0]);
  p.rates.back().ranks = 2;
  p.rates.back().membw_gbs = 7;
  EXPECT_EQ(p.rates_for(1).threads, 1);
  EXPECT_EQ(p.rates_for(3).threads, 1);
  EXPECT_EQ(p.rates_for(4).threads, 4);
  EXPECT_EQ(p.rates_for(8).threads, 4);
  EXPECT_EQ(p.rates_for(1, 2).membw_gbs, 7);  // measured while 2 ranks ran
  EXPECT_EQ(p.rates_for(4, 3).ranks, 1);      // none for 3 ranks: measured alone
}

TEST(ProfileFit, RecoversKnownRates) {
  const std::vector<double> x = {1e8, 3e8, 2e8, 5e7}, y = {1e6, 4e6, 9e6, 2e5};
  std::vector<double> m;
  for (size_t i = 0; i < x.size(); ++i) m.push_back(0.3e-9 * x[i] + 5e-9 * y[i]);
  double a = 0, b = 0;
  fit_two_rates(x, y, m, a, b);
  EXPECT_NEAR(a, 0.3e-9, 1e-15);
  EXPECT_NEAR(b, 5e-9, 1e-14);
  // Data that a negative score rate would fit best: the fit keeps both rates >= 0.
  std::vector<double> m2;
  for (size_t i = 0; i < x.size(); ++i) m2.push_back(0.3e-9 * x[i] - 1e-9 * y[i] + 1e-3);
  fit_two_rates(x, y, m2, a, b);
  EXPECT_GE(a, 0);
  EXPECT_EQ(b, 0);
}

// With a flat curve every product costs FLOPs / rate; the other parts follow their formulas.
TEST(StepModel, AddsTheParts) {
  const ModelConfig c = load_model_config(ZAYA_SOURCE_DIR "/configs/small.json");
  const HardwareProfile p = flat_profile(50);
  TrainPlan plan;
  plan.micro_batch = 4, plan.seq = 128, plan.global_batch = 16, plan.world = 1;
  const StepTime t = predict_step(c, plan, p);
  EXPECT_EQ(t.micro_batches, 4);
  EXPECT_EQ(t.threads, 2);
  double flops = 0;
  for (const GemmShape& g : model_gemms(c, 4, 128)) flops += g.flops() * double(g.count);
  EXPECT_NEAR(t.gemm, 4 * flops / 50e9, 1e-12);
  const OtherWork w = other_work(c, 4, 128);
  EXPECT_EQ(w.logits, 4.0 * 128 * 4096);
  EXPECT_EQ(w.scores, 4.0 * 4 * 4 * 128 * 129 / 2);  // 4 CCA stages × B 4 × 4 q heads
  EXPECT_NEAR(t.other, 4 * (w.act_bytes * 0.25 + w.scores * 2 + w.logits * 3) * 1e-9, 1e-12);
  EXPECT_GT(t.optimizer, 0);
  EXPECT_EQ(t.comm, 0);
  EXPECT_DOUBLE_EQ(t.total(), t.gemm + t.other + t.optimizer + t.comm);

  plan.world = 2;
  EXPECT_THROW(predict_step(c, plan, p), Error);  // no collectives measured
  HardwareProfile with_comm = p;
  with_comm.comm = {2, 1.0, 10};
  const StepTime t2 = predict_step(c, plan, with_comm);
  EXPECT_EQ(t2.micro_batches, 2);
  EXPECT_EQ(t2.threads, 1);  // 2 cores shared by 2 ranks
  // Reduce-scatter + all-gather: each moves half the (padded) fp32 parameters at 1 GB/s.
  EXPECT_GT(t2.comm, 2 * 4.0 * 7898348 / 2 / 1e9);
  plan.global_batch = 6;
  EXPECT_THROW(predict_step(c, plan, with_comm), Error);  // 6 is not a multiple of 4 × 2
}

// ZAYA1-base's published counts (8.3B non-embedding, 760M active) as the architecture notes
// derive them from its shapes.
TEST(SizeShapes, ReproducesZaya1BaseCounts) {
  HardwareProfile p;
  ASSERT_TRUE(builtin_profile("mi300x", p));
  SizeGoal g;
  g.world = 1024;
  g.seq = 4096;
  const Candidate k =
      evaluate_config(load_model_config(ZAYA_SOURCE_DIR "/configs/zaya1-base.json"), g, p);
  EXPECT_EQ(k.info.non_embedding_params, 8303355728);
  EXPECT_EQ(k.info.active_non_embedding, 753608528);
  EXPECT_EQ(k.info.total_params, 8840488784);
  EXPECT_GE(k.max_micro_batch, 1);  // fits a 192 GB MI300X under ZeRO-1 over 1024 ranks
  // bf16 for every value (the routing biases too), + 4 bytes for each of the 14,189,048 values
  // the bf16 weight storage keeps in fp32 (every tensor but the Muon matrices and the embedding),
  // and the 1,160 floats of alignment padding between tensors (model/params.h: every tensor at a
  // multiple of 16 floats; 14 after each of the 40 attention stages' 2 key temperatures, 15 after
  // each of the 40 MoE stages' 17 balancing biases), and the 2^22 floats of staging between the
  // host and the storage (model/parameter_placement.h).
  EXPECT_EQ(k.memory.weights, 2 * (8840488784 + 680 + 1160) + 4 * 14189048 + 4 * (1 << 22));
}

// Non-embedding parameter counts of a ZAYA1 shape from the architecture itself, written out here
// rather than read from ParamRegistry / compute_model_info (what the search counts with). Every
// stage has an input RMSNorm and the hidden-state scale and bias (3E); from stage 1 on also the
// residual scale and bias (2E). A CCA stage (even index) has the q, k and two half-width value
// projections ((Dq + 2 Dk)·E), the two-layer causal convolution over the C = Dq + Dk query/key
// channels (depthwise 2-tap + bias, then grouped d-wide 2-tap + bias: 3C + (2d + 1)C), one key
// temperature per key head and the output projection (E·Dq). An MoE stage (odd index) has the
// router (down-projection R·E + R, from stage 3 on a latent scale R, its RMSNorm R, two R×R
// layers with biases, the route logits (X + 1)·R) and X SwiGLU experts of 3·E·F each; one of
// them is active per token. After the last stage: the final merge's four vectors and the final
// norm (5E).
struct ParamCounts {
  int64_t non_embedding = 0, active = 0;
};

ParamCounts count_by_hand(const ModelConfig& c, int64_t stages) {
  const int64_t E = c.hidden_size, d = c.head_dim, R = c.router_dim, F = c.expert_hidden;
  const int64_t X = c.num_experts, Dq = c.num_q_heads * d, Dk = c.num_kv_heads * d, C = Dq + Dk;
  ParamCounts n;
  for (int64_t i = 0; i < stages; ++i) {
    const int64_t norms = 3 * E + (i >= 1 ? 2 * E : 0);
    if (i % 2 == 0) {
      const int64_t cca = (Dq + 2 * Dk) * E + 3 * C + (2 * d + 1) * C + c.num_kv_heads + E * Dq;
      n.non_embedding += norms + cca;
      n.active += norms + cca;
    } else {
      const int64_t router = R * E + R + (i >= 3 ? R : 0) + R + 2 * (R * R + R) + (X + 1) * R;
      n.non_embedding += norms + router + X * 3 * E * F;
      n.active += norms + router + 3 * E * F;
    }
  }
  n.non_embedding += 5 * E;
  n.active += 5 * E;
  return n;
}

// The hand count is right where the answer is known from outside zaya: ZAYA1-base's shapes give
// its published 8.3B non-embedding / 760M active (exactly 8,303,355,728 and 753,608,528).
TEST(SizeShapes, HandCountReproducesZaya1Base) {
  const ModelConfig c = load_model_config(ZAYA_SOURCE_DIR "/configs/zaya1-base.json");
  const ParamCounts n = count_by_hand(c, c.num_stages);
  EXPECT_EQ(n.non_embedding, 8303355728);
  EXPECT_EQ(n.active, 753608528);
}

// What a proposed shape must satisfy, checked against the hand count above and the rules of
// sizing_rules() rather than the search's own ±15 % filter on its own count: the counts it reports
// are the shape's real counts; the depth is the even stage count whose active count is nearest the
// target (no shallower or deeper even depth is closer); and the widths follow the stated rules.
void expect_follows_rules(const Candidate& k, const HardwareProfile& p, double active) {
  const ModelConfig& c = k.config;
  const int64_t a = p.device == ProfileDevice::kGpu ? 128 : 64;
  const int64_t E = c.hidden_size;
  EXPECT_EQ(E % a, 0);
  EXPECT_EQ(c.expert_hidden % a, 0);
  EXPECT_TRUE(c.expert_hidden == E / 2 || c.expert_hidden == E || c.expert_hidden == 2 * E)
      << "expert width " << c.expert_hidden << " for hidden " << E;
  EXPECT_EQ(c.router_dim, std::max<int64_t>(16, E / 8 / 16 * 16)) << "hidden " << E;
  EXPECT_EQ(c.q_dim() * 2, E);
  EXPECT_TRUE(c.num_q_heads == 4 * c.num_kv_heads || c.num_q_heads == 2 * c.num_kv_heads);
  EXPECT_EQ(c.head_dim, p.device == ProfileDevice::kGpu ? 128 : (E >= 512 ? 64 : 32))
      << "hidden " << E;
  EXPECT_EQ(c.vocab_size % 64, 0);
  ASSERT_EQ(c.num_stages % 2, 0);
  ASSERT_GE(c.num_stages, 2);

  const ParamCounts n = count_by_hand(c, c.num_stages);
  EXPECT_EQ(k.info.non_embedding_params, n.non_embedding) << "E " << E << " L " << c.num_stages;
  EXPECT_EQ(k.info.active_non_embedding, n.active) << "E " << E << " L " << c.num_stages;
  EXPECT_NEAR(double(n.active) / active, 1.0, 0.15) << "E " << E << " L " << c.num_stages;
  const double miss = std::abs(double(n.active) - active);
  for (const int64_t other : {c.num_stages - 2, c.num_stages + 2}) {
    if (other < 2) continue;  // two stages is the shallowest ZAYA1 shape
    EXPECT_LE(miss, std::abs(double(count_by_hand(c, other).active) - active))
        << "E " << E << " F " << c.expert_hidden << ": " << other << " stages are closer to "
        << active << " active than the proposed " << c.num_stages;
  }

  const double aspect = double(E) / double(c.num_stages / 2);
  EXPECT_GE(aspect, 32);
  EXPECT_LE(aspect, 160);
  EXPECT_GE(k.max_micro_batch, k.micro_batch);
  EXPECT_NO_THROW(c.validate("proposed"));
}

TEST(SizeShapes, ProposalsFollowTheRules) {
  HardwareProfile gpu;
  ASSERT_TRUE(builtin_profile("h100", gpu));
  SizeGoal g;
  g.active_params = 760e6;
  g.vocab = 262145;
  g.world = 64;
  const std::vector<Candidate> cs = propose_shapes(g, gpu, 10);
  ASSERT_FALSE(cs.empty());
  for (const Candidate& k : cs) {
    expect_follows_rules(k, gpu, 760e6);
    EXPECT_EQ(k.config.vocab_size, 262208);  // 262145 padded to 64 × 4097
  }
  for (size_t i = 1; i < cs.size(); ++i)  // best first
    EXPECT_GE(cs[i - 1].tokens_per_s * double(cs[i - 1].info.active_non_embedding),
              cs[i].tokens_per_s * double(cs[i].info.active_non_embedding));

  const HardwareProfile cpu = flat_profile();
  SizeGoal small;
  small.active_params = 3e6;
  small.experts = 8;
  small.global_batch = 32;
  const std::vector<Candidate> cc = propose_shapes(small, cpu, 10);
  ASSERT_FALSE(cc.empty());
  for (const Candidate& k : cc) {
    expect_follows_rules(k, cpu, 3e6);
    EXPECT_EQ(32 % k.micro_batch, 0);
    EXPECT_EQ(k.config.num_experts, 8);
  }
}

TEST(SizeShapes, BudgetsNeedTokensAndPickAFittingSize) {
  HardwareProfile gpu;
  ASSERT_TRUE(builtin_profile("mi300x", gpu));
  SizeGoal g;
  g.flops = 1e21;
  g.world = 64;
  EXPECT_THROW(propose_shapes(g, gpu, 5), Error);  // no tokens
  g.tokens = 1e11;
  const std::vector<Candidate> byf = propose_shapes(g, gpu, 5);
  ASSERT_FALSE(byf.empty());
  for (const Candidate& k : byf) expect_follows_rules(k, gpu, 1e21 / 6 / 1e11);
  SizeGoal h;
  h.gpu_hours = 2000;
  h.tokens = 2e10;
  h.world = 8;
  const std::vector<Candidate> byh = propose_shapes(h, gpu, 5);
  ASSERT_FALSE(byh.empty());
  for (const Candidate& k : byh) EXPECT_LE(k.hours_for_tokens * 8, 2000.0);
}

}  // namespace
}  // namespace zaya
