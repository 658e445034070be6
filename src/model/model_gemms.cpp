#include "model/model_gemms.h"

#include <algorithm>
#include <map>

#include "model/params.h"

namespace zaya {

namespace {

constexpr int kAttentionBlock = 64;  // backend/cpu/attention.cpp
constexpr int kExpertRowTile = 64;   // backend/cpu/matmul.cpp

// nn.Linear out[n, m] = in[n, k] · w[m, k]ᵀ: the forward, the input gradient din[n, k] = dout · w
// and the weight gradient dw[m, k] = doutᵀ · in (backend/cpu/matmul.cpp).
void linear(std::vector<GemmShape>& out, const std::string& name, int n, int k, int m,
            int64_t count) {
  out.push_back({name + " fwd", n, m, k, false, true, count});
  out.push_back({name + " dx", n, k, m, false, false, count});
  out.push_back({name + " dw", m, k, n, true, false, count});
}

}  // namespace

std::vector<GemmShape> model_gemms(const ModelConfig& c, int batch, int seq) {
  std::vector<GemmShape> g;
  const int N = batch * seq, E = int(c.hidden_size), d = int(c.head_dim);
  const int Dq = int(c.q_dim()), Dk = int(c.kv_dim()), C = Dq + Dk, P = C + Dk;
  const int64_t La = c.num_attention_stages(), Lm = c.num_moe_stages();
  // CCA: the fused q/k/value projection, the grouped convolution (per sequence and group of d
  // channels, two taps), causal attention in 64-blocks and the output projection.
  linear(g, "cca.qkv", N, E, P, La);
  const int64_t conv = La * batch * (C / d) * 2;
  g.push_back({"cca.conv fwd", seq, d, d, false, true, conv});
  g.push_back({"cca.conv dx", seq, d, d, false, false, conv});
  g.push_back({"cca.conv dw", d, d, seq, true, false, conv});
  const int blocks = (seq + kAttentionBlock - 1) / kAttentionBlock;
  const int b = std::min(seq, kAttentionBlock);
  const int64_t pairs = La * batch * c.num_q_heads * int64_t(blocks) * (blocks + 1) / 2;
  // Forward: scores, then P·V. Backward: scores and dP = dO·Vᵀ twice (the dQ pass and the dK/dV
  // pass), then dQ, dK and dV.
  g.push_back({"attn scores", b, b, d, false, true, 3 * pairs});
  g.push_back({"attn dP", b, b, d, false, true, 2 * pairs});
  g.push_back({"attn PV", b, d, b, false, false, 2 * pairs});
  g.push_back({"attn dK/dV", b, d, b, true, false, 2 * pairs});
  linear(g, "cca.o_proj", N, Dq, E, La);
  // MoE: the router (down-projection, two hidden layers, the route logits), then the experts on
  // their tokens in 64-row tiles.
  const int R = int(c.router_dim), routes = int(c.num_routes());
  linear(g, "router.down", N, E, R, Lm);
  linear(g, "router.mlp", N, R, R, 2 * Lm);
  linear(g, "router.logits", N, R, routes, Lm);
  const int F = int(c.expert_hidden), X = int(c.num_experts);
  const int rows = N / routes;  // tokens per expert
  if (rows > 0) {
    const int64_t tiles = Lm * X * ((rows + kExpertRowTile - 1) / kExpertRowTile);
    const int t = kExpertRowTile;
    g.push_back({"expert.fc1 fwd", t, 2 * F, E, false, true, tiles});
    g.push_back({"expert.fc1 dx", t, E, 2 * F, false, false, tiles});
    g.push_back({"expert.fc1 dw", 2 * F, E, rows, true, false, Lm * X});
    g.push_back({"expert.fc2 fwd", t, E, F, false, true, tiles});
    g.push_back({"expert.fc2 dx", t, F, E, false, false, tiles});
    g.push_back({"expert.fc2 dw", E, F, rows, true, false, Lm * X});
  }
  linear(g, "lm_head", N, E, int(c.vocab_size), 1);
  return g;
}

std::vector<GemmShape> muon_gemms(const ModelConfig& c, int ns_steps) {
  // Identical matrices (every expert's fc1, ...) give one row with their count.
  std::map<std::pair<int64_t, int64_t>, int64_t> matrices;
  const ParamRegistry registry(c);
  for (const ParamSpec& s : registry.specs())
    if (s.group == OptimGroup::Muon && s.shape.size() == 2)
      ++matrices[{std::min(s.shape[0], s.shape[1]), std::max(s.shape[0], s.shape[1])}];
  std::vector<GemmShape> g;
  for (const auto& [dims, count] : matrices) {
    const int m = int(dims.first), n = int(dims.second);
    const std::string name = "muon " + std::to_string(m) + "x" + std::to_string(n);
    g.push_back({name + " X.Xt", m, m, n, false, true, count * ns_steps});
    g.push_back({name + " A.A", m, m, m, false, false, count * ns_steps});
    g.push_back({name + " B.X", m, n, m, false, false, count * ns_steps});
  }
  return g;
}

}  // namespace zaya
