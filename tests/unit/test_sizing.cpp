// The products `zaya bench gemm --shapes model:CONFIG` times, against facts that do not come from
// the code that lists them: the weight shapes of the parameter registry and a brute-force count
// of causal attention blocks; and the STREAM kernels of `zaya bench membw`.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "bench/gemm_bench.h"
#include "bench/membw_bench.h"
#include "core/error.h"
#include "model/config.h"
#include "model/model_gemms.h"
#include "model/params.h"

namespace zaya {
namespace {

ModelConfig tiny() {
  return load_model_config(ZAYA_SOURCE_DIR "/configs/tiny.json");
}

double flops_of(const std::vector<GemmShape>& g, const std::string& suffix,
                const std::string& prefix = "") {
  double f = 0;
  for (const GemmShape& s : g)
    if (s.name.size() >= suffix.size() &&
        s.name.compare(s.name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
        s.name.rfind(prefix, 0) == 0)
      f += s.flops() * double(s.count);
  return f;
}

// Every token goes through every dense weight matrix once (2 FLOPs per weight), and each expert
// takes its share N / routes of the tokens: the forward products must add up to exactly that,
// counted from the registry's weight shapes.
TEST(ModelGemms, ForwardFlopsMatchTheWeightShapes) {
  for (const int seq : {64, 100}) {
    const ModelConfig c = tiny();
    const int B = 3, N = B * seq;
    const ParamRegistry reg(c);
    double dense = 0, expert = 0;
    for (const ParamSpec& s : reg.specs()) {
      if (s.shape.size() != 2 || s.name.find("conv") != std::string::npos) continue;
      if (s.name.find("local_experts") != std::string::npos)
        expert += double(s.numel);
      else
        dense += double(s.numel);  // the embedding counts once: it is also the LM head
    }
    const int per_expert = N / int(c.num_routes());
    const double want = 2.0 * N * dense + 2.0 * per_expert * expert;
    // Expert products run in 64-row tiles (padded): count their rows as the tiles do.
    const std::vector<GemmShape> g = model_gemms(c, B, seq);
    double got = 0;
    for (const GemmShape& s : g) {
      if (s.name.rfind("attn", 0) == 0 || s.name.rfind("cca.conv", 0) == 0) continue;
      if (s.name.size() < 4 || s.name.compare(s.name.size() - 3, 3, "fwd") != 0) continue;
      if (s.name.rfind("expert", 0) == 0) {
        const double tiles = double((per_expert + 63) / 64);
        got += s.flops() * double(s.count) / tiles * per_expert / 64.0;
      } else {
        got += s.flops() * double(s.count);
      }
    }
    EXPECT_NEAR(got, want, 1e-9 * want) << "seq " << seq;
  }
}

// A linear layer's input and weight gradients cost what its forward costs.
TEST(ModelGemms, BackwardProductsMatchTheForward) {
  const std::vector<GemmShape> g = model_gemms(tiny(), 2, 128);
  for (const char* layer :
       {"cca.qkv", "cca.o_proj", "router.down", "router.mlp", "router.logits", "lm_head"}) {
    const double fwd = flops_of(g, "fwd", layer);
    EXPECT_GT(fwd, 0) << layer;
    EXPECT_DOUBLE_EQ(flops_of(g, "dx", layer), fwd) << layer;
    EXPECT_DOUBLE_EQ(flops_of(g, "dw", layer), fwd) << layer;
  }
}

// Causal attention in 64-blocks: a brute-force count, position by position, of the (query block,
// key block) pairs that hold at least one unmasked score (key position <= query position). Each
// of the four attention products must be listed exactly once, 64-wide (the sequence where it is
// shorter) over the head dim, with the count the backward's passes give: scores three times (the
// forward, the dQ pass and the dK/dV pass), dP twice, P·V and its dK/dV transpose twice each.
TEST(ModelGemms, AttentionBlocksAreTheCausalOnes) {
  const ModelConfig c = tiny();
  for (const int seq : {64, 65, 200}) {
    int64_t pairs = 0;
    for (int qb = 0; qb < seq; qb += 64)
      for (int kb = 0; kb < seq; kb += 64) {
        bool unmasked = false;
        for (int q = qb; q < std::min(qb + 64, seq) && !unmasked; ++q)
          for (int k = kb; k < std::min(kb + 64, seq) && !unmasked; ++k) unmasked = k <= q;
        pairs += unmasked ? 1 : 0;
      }
    pairs *= 2 * c.num_q_heads * c.num_attention_stages();  // batch 2
    std::map<std::string, std::vector<GemmShape>> attention;
    for (const GemmShape& s : model_gemms(c, 2, seq))
      if (s.name.rfind("attn", 0) == 0) attention[s.name].push_back(s);
    const int b = std::min(seq, 64), d = int(c.head_dim);
    const std::map<std::string, int64_t> times = {
        {"attn scores", 3}, {"attn dP", 2}, {"attn PV", 2}, {"attn dK/dV", 2}};
    EXPECT_EQ(attention.size(), times.size()) << "seq " << seq;
    for (const auto& [name, count] : times) {
      ASSERT_EQ(attention[name].size(), 1u) << "'" << name << "' listed once, seq " << seq;
      const GemmShape& s = attention[name][0];
      EXPECT_EQ(s.count, count * pairs) << name << ", seq " << seq;
      // Each block product is b × b × d (scores, dP) or b × d × b (P·V, dK/dV): b²·d multiply-adds.
      EXPECT_EQ(int64_t(s.m) * s.n * s.k, int64_t(b) * b * d) << name << ", seq " << seq;
      EXPECT_EQ(s.m, b) << name << ", seq " << seq;
    }
  }
}

TEST(ModelGemms, MuonCoversEveryMuonMatrix) {
  const ModelConfig c = tiny();
  int64_t matrices = 0;
  const ParamRegistry registry(c);
  for (const ParamSpec& s : registry.specs()) matrices += s.group == OptimGroup::Muon;
  int64_t listed = 0;
  for (const GemmShape& s : muon_gemms(c, 5))
    if (s.name.find("A.A") != std::string::npos) listed += s.count / 5;
  EXPECT_EQ(listed, matrices);
}

TEST(GemmBench, ParsesShapeListsAndNamesBadEntries) {
  const std::vector<GemmShape> s = parse_gemm_list("4096x2048x2048,1x2x3");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].m, 4096);
  EXPECT_EQ(s[1].k, 3);
  for (const char* bad : {"", "12x3", "1x2x3x", "0x1x1", "1x1x70000", "1x2x3,,4x5x6"}) {
    try {
      parse_gemm_list(bad);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--shapes"), std::string::npos) << e.what();
    }
  }
}

// The kernels run and check their own results (as STREAM does); rates are positive.
TEST(MembwBench, KernelsComputeStreamsResults) {
  MembwOptions opt;
  opt.elements = 1 << 14;
  opt.times = 3;
  opt.threads = {1, 2};
  std::FILE* sink = std::tmpfile();
  const std::vector<MembwRow> rows = run_membw_bench(opt, sink);
  std::fclose(sink);
  ASSERT_EQ(rows.size(), 2u);
  for (const MembwRow& r : rows) {
    EXPECT_GT(r.copy, 0);
    EXPECT_GT(r.triad, 0);
  }
}

}  // namespace
}  // namespace zaya
