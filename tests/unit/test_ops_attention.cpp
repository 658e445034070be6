// Causal grouped-query attention (backend/cpu/attention.h): the blocked online-softmax forward
// against a naive O(S²) causal softmax attention computed in double, at sequence lengths below and
// above the 64-row block (1, 2, 3, 63, 64, 65, 70, 130), and the backward for q, k and v against
// central differences, for GQA (nq = 4, nk = 2; nq = 4, nk = 1) and plain MHA (nq = nk).
//
// Gradient check: with q, k, v uniform in [-1, 1] and scale 1/sqrt(d) the scores are O(1), so the
// softmax's third derivatives are O(1) and eps = 1e-2 gives truncation ≈ 2e-5 relative. A probe of
// q touches d outputs; a probe of k or v touches every later row of its group's heads, whose fp32
// rounding (≈ 1e-7 each) divided by 2eps stays ~1e-4 of the gradient scale at S = 130. Tolerance:
// default rtol 1e-2, atol 1e-3 · max|grad|. Long sequences probe a random subset of elements.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/attention.h"
#include "gradcheck.h"

namespace zaya::cpu {
namespace {

using test::check_gradient;
using test::GradCheckOptions;
using test::random_uniform;
using test::weighted_sum;

struct AttnShape {
  int batch, seq, nq, nk, d;
};

std::string Describe(const AttnShape& s) {
  return "batch=" + std::to_string(s.batch) + " seq=" + std::to_string(s.seq) +
         " nq=" + std::to_string(s.nq) + " nk=" + std::to_string(s.nk) +
         " d=" + std::to_string(s.d);
}

// Naive causal attention in double: out[b, i, h] = Σ_{j ≤ i} softmax_j(scale·q_i·k_j) v_j.
void NaiveAttention(std::vector<double>& out, std::vector<double>& lse, const std::vector<float>& q,
                    const std::vector<float>& k, const std::vector<float>& v, const AttnShape& s,
                    double scale) {
  const int group = s.nq / s.nk;
  out.assign(size_t(s.batch) * s.seq * s.nq * s.d, 0.0);
  lse.assign(size_t(s.batch) * s.nq * s.seq, 0.0);
  std::vector<double> p(s.seq);
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.nq; ++h)
      for (int i = 0; i < s.seq; ++i) {
        const float* qi = &q[((size_t(b) * s.seq + i) * s.nq + h) * s.d];
        double mx = -INFINITY;
        for (int j = 0; j <= i; ++j) {
          const float* kj = &k[((size_t(b) * s.seq + j) * s.nk + h / group) * s.d];
          double dot = 0.0;
          for (int c = 0; c < s.d; ++c) dot += double(qi[c]) * kj[c];
          p[j] = scale * dot;
          mx = std::max(mx, p[j]);
        }
        double z = 0.0;
        for (int j = 0; j <= i; ++j) z += std::exp(p[j] - mx);
        lse[(size_t(b) * s.nq + h) * s.seq + i] = mx + std::log(z);
        double* o = &out[((size_t(b) * s.seq + i) * s.nq + h) * s.d];
        for (int j = 0; j <= i; ++j) {
          const float* vj = &v[((size_t(b) * s.seq + j) * s.nk + h / group) * s.d];
          const double w = std::exp(p[j] - mx) / z;
          for (int c = 0; c < s.d; ++c) o[c] += w * vj[c];
        }
      }
}

TEST(OpsAttention, ForwardMatchesNaive) {
  std::mt19937 rng(81);
  const AttnShape shapes[] = {{1, 1, 1, 1, 4},   {2, 2, 4, 2, 8},   {1, 3, 4, 2, 8},
                              {1, 3, 2, 2, 5},   {1, 63, 2, 1, 8},  {1, 64, 4, 2, 8},
                              {1, 65, 2, 2, 8},  {2, 70, 4, 2, 16}, {1, 130, 4, 2, 8},
                              {1, 130, 3, 3, 4}, {1, 129, 4, 4, 8}};
  for (const AttnShape& s : shapes) {
    SCOPED_TRACE(Describe(s));
    // Scores up to ~±4: a non-trivial softmax, not nearly uniform.
    const std::vector<float> q = random_uniform(size_t(s.batch) * s.seq * s.nq * s.d, rng, -2, 2);
    const std::vector<float> k = random_uniform(size_t(s.batch) * s.seq * s.nk * s.d, rng, -2, 2);
    const std::vector<float> v = random_uniform(k.size(), rng);
    const float scale = 1.0f / std::sqrt(float(s.d));
    std::vector<float> out(q.size()), lse(size_t(s.batch) * s.nq * s.seq);
    attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), s.batch, s.seq, s.nq,
                      s.nk, s.d, scale);
    std::vector<double> ref_out, ref_lse;
    NaiveAttention(ref_out, ref_lse, q, k, v, s, scale);
    double max_out = 0.0, max_lse = 0.0;
    for (size_t i = 0; i < out.size(); ++i)
      max_out = std::max(max_out, std::abs(out[i] - ref_out[i]));
    for (size_t i = 0; i < lse.size(); ++i)
      max_lse = std::max(max_lse, std::abs(lse[i] - ref_lse[i]) / (1.0 + std::abs(ref_lse[i])));
    // fp32 with |v| ≤ 1: a few ulp per accumulated term.
    EXPECT_LT(max_out, 2e-5);
    EXPECT_LT(max_lse, 2e-6);
  }
}

void CheckAttentionGrad(const AttnShape& s, std::mt19937& rng, size_t max_checks) {
  SCOPED_TRACE(Describe(s));
  std::vector<float> q = random_uniform(size_t(s.batch) * s.seq * s.nq * s.d, rng);
  std::vector<float> k = random_uniform(size_t(s.batch) * s.seq * s.nk * s.d, rng);
  std::vector<float> v = random_uniform(k.size(), rng);
  const float scale = 1.0f / std::sqrt(float(s.d));
  const std::vector<float> R = random_uniform(q.size(), rng);
  std::vector<float> out(q.size()), lse(size_t(s.batch) * s.nq * s.seq);
  auto loss = [&] {
    attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), s.batch, s.seq, s.nq,
                      s.nk, s.d, scale);
    return weighted_sum(out, R);
  };
  loss();
  std::vector<float> dq(q.size(), 0.0f), dk(k.size(), 0.0f), dv(v.size(), 0.0f);
  attention_backward(dq.data(), dk.data(), dv.data(), R.data(), out.data(), lse.data(), q.data(),
                     k.data(), v.data(), s.batch, s.seq, s.nq, s.nk, s.d, scale);
  GradCheckOptions opt;  // eps 1e-2, rtol 1e-2, atol 1e-3 · max|grad|
  opt.max_checks = max_checks;
  EXPECT_TRUE(check_gradient("attention dq", q, dq, loss, opt));
  EXPECT_TRUE(check_gradient("attention dk", k, dk, loss, opt));
  EXPECT_TRUE(check_gradient("attention dv", v, dv, loss, opt));
  // In a 1-row sequence the softmax of a single score is constant 1: dq and dk vanish (up to fp32
  // rounding) while dv = dout.
  if (s.seq == 1) {
    for (float g : dq) EXPECT_NEAR(g, 0.0f, 1e-6f);
    for (float g : dk) EXPECT_NEAR(g, 0.0f, 1e-6f);
  }
}

TEST(OpsAttention, GradientGqaShortSequences) {
  std::mt19937 rng(82);
  for (int seq : {1, 2, 3}) CheckAttentionGrad({2, seq, 4, 2, 8}, rng, 0);
  for (int seq : {1, 2, 3}) CheckAttentionGrad({1, seq, 4, 1, 6}, rng, 0);
}

TEST(OpsAttention, GradientMhaShortSequences) {
  std::mt19937 rng(83);
  for (int seq : {1, 2, 3}) CheckAttentionGrad({2, seq, 2, 2, 8}, rng, 0);
  std::uniform_int_distribution<int> len(4, 12), dim(2, 9);
  for (int rep = 0; rep < 2; ++rep) CheckAttentionGrad({1, len(rng), 3, 3, dim(rng)}, rng, 0);
}

TEST(OpsAttention, GradientAcrossBlocks) {
  // 70 and 130 rows span two and three 64-row blocks (both passes of the backward cross them).
  std::mt19937 rng(84);
  CheckAttentionGrad({1, 70, 4, 2, 8}, rng, 0);
  CheckAttentionGrad({1, 70, 2, 2, 4}, rng, 0);
  CheckAttentionGrad({1, 130, 4, 2, 4}, rng, 800);
}

TEST(OpsAttention, BackwardSkipsNullGradients) {
  std::mt19937 rng(85);
  const AttnShape s{1, 5, 4, 2, 4};
  const std::vector<float> q = random_uniform(size_t(s.seq) * s.nq * s.d, rng);
  const std::vector<float> k = random_uniform(size_t(s.seq) * s.nk * s.d, rng);
  const std::vector<float> v = random_uniform(k.size(), rng);
  const std::vector<float> dout = random_uniform(q.size(), rng);
  std::vector<float> out(q.size()), lse(size_t(s.nq) * s.seq);
  attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), 1, s.seq, s.nq, s.nk, s.d,
                    0.5f);
  std::vector<float> dq(q.size(), 0.0f), dk(k.size(), 0.0f), dv(v.size(), 0.0f);
  attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), out.data(), lse.data(), q.data(),
                     k.data(), v.data(), 1, s.seq, s.nq, s.nk, s.d, 0.5f);
  std::vector<float> dq2(q.size(), 1.0f), dv2(v.size(), 1.0f);  // accumulates onto 1
  attention_backward(dq2.data(), nullptr, dv2.data(), dout.data(), out.data(), lse.data(), q.data(),
                     k.data(), v.data(), 1, s.seq, s.nq, s.nk, s.d, 0.5f);
  for (size_t i = 0; i < dq.size(); ++i) EXPECT_NEAR(dq2[i], dq[i] + 1.0f, 1e-6f);
  for (size_t i = 0; i < dv.size(); ++i) EXPECT_NEAR(dv2[i], dv[i] + 1.0f, 1e-6f);
}

}  // namespace
}  // namespace zaya::cpu
