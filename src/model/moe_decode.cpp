#include "model/moe_decode.h"

#include <cstring>
#include <vector>

#include "backend/cpu/activation.h"
#include "backend/cpu/model_ops.h"
#include "backend/cpu/norm.h"
#include "backend/cpu/rowwise.h"

namespace zaya {

void moe_decode(float* out, float* state_out, const float* x, const float* state_in,
                const MoeWeights& w, const ModelConfig& c, int n, Arena& arena, int32_t* routes) {
  const int E = int(c.hidden_size), R = int(c.router_dim), X = int(c.num_experts), NR = X + 1;
  const int F = int(c.expert_hidden);
  // Router: down-projection, EDA, RMSNorm, GELU MLP, softmax over X+1 routes (moe.cpp's steps).
  cpu::rows_matmul_forward(state_out, x, w.down_w, w.down_b, n, E, R);
  if (w.states_scale && state_in)
    for (size_t i = 0; i < size_t(n) * R; ++i) state_out[i] += w.states_scale[i % R] * state_in[i];
  float* hn = arena.floats(size_t(n) * R);
  cpu::rmsnorm_forward(hn, nullptr, state_out, w.rms_w, n, R, float(c.router_norm_eps));
  float* m1 = arena.floats(size_t(n) * R);
  float* m2 = arena.floats(size_t(n) * R);
  cpu::rows_matmul_forward(m1, hn, w.mlp0_w, w.mlp0_b, n, R, R);
  cpu::gelu_forward(m1, m1, long(n) * R);
  cpu::rows_matmul_forward(m2, m1, w.mlp2_w, w.mlp2_b, n, R, R);
  cpu::gelu_forward(m2, m2, long(n) * R);
  float* logits = arena.floats(size_t(n) * NR);
  cpu::rows_matmul_forward(logits, m2, w.mlp4_w, nullptr, n, R, NR);
  float* probs = arena.floats(size_t(n) * NR);
  cpu::softmax_forward(probs, logits, n, NR);

  // Top-1 choice (top1_route); then the rows of each expert together.
  std::vector<std::vector<int32_t>> members(static_cast<size_t>(NR));
  for (int t = 0; t < n; ++t) {
    const int best = cpu::top1_route(probs + size_t(t) * NR, w.balancing_biases, NR);
    members[size_t(best)].push_back(t);
    if (routes) routes[t] = best;
  }
  float* xg = arena.floats(size_t(n) * E);
  float* h1 = arena.floats(size_t(n) * 2 * F);
  float* sw = arena.floats(size_t(n) * F);
  float* y = arena.floats(size_t(n) * E);
  for (int e = 0; e < X; ++e) {
    const std::vector<int32_t>& rows = members[size_t(e)];
    const int m = int(rows.size());
    if (m == 0) continue;
    for (int i = 0; i < m; ++i)
      std::memcpy(xg + size_t(i) * E, x + size_t(rows[size_t(i)]) * E, sizeof(float) * E);
    cpu::rows_matmul_forward(h1, xg, w.fc1[size_t(e)], nullptr, m, E, 2 * F);
    cpu::swiglu_forward(sw, h1, m, F);
    cpu::rows_matmul_forward(y, sw, w.fc2[size_t(e)], nullptr, m, F, E);
    for (int i = 0; i < m; ++i) {
      const int t = rows[size_t(i)];
      const float gate = probs[size_t(t) * NR + e];
      for (int j = 0; j < E; ++j) out[size_t(t) * E + j] = gate * y[size_t(i) * E + j];
    }
  }
  // Skip route (mixture-of-depths): gate · x.
  for (const int32_t t : members[size_t(X)]) {
    const float gate = probs[size_t(t) * NR + X];
    for (int j = 0; j < E; ++j) out[size_t(t) * E + j] = gate * x[size_t(t) * E + j];
  }
}

}  // namespace zaya
