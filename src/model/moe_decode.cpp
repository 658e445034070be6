#include "model/moe_decode.h"

#include <vector>

namespace zaya {

void moe_decode(const Backend& be, float* out, float* state_out, const float* x,
                const float* state_in, const MoeWeights& w, const ModelConfig& c, int n,
                Arena& arena, int32_t* routes) {
  const int E = int(c.hidden_size), R = int(c.router_dim), X = int(c.num_experts), NR = X + 1;
  const int F = int(c.expert_hidden);
  // Router: down-projection, EDA, RMSNorm, GELU MLP, softmax over X+1 routes (moe.cpp's steps).
  be.rows_matmul_forward(state_out, x, w.down_w.f32(kDecodeWeights), w.down_b, n, E, R);
  if (w.states_scale && state_in) be.eda_forward(state_out, w.states_scale, state_in, n, R);
  float* hn = arena.floats(size_t(n) * R);
  be.rmsnorm_forward(hn, nullptr, state_out, w.rms_w, n, R, float(c.router_norm_eps));
  float* m1 = arena.floats(size_t(n) * R);
  float* m2 = arena.floats(size_t(n) * R);
  be.rows_matmul_forward(m1, hn, w.mlp0_w.f32(kDecodeWeights), w.mlp0_b, n, R, R);
  be.gelu_forward(m1, m1, long(n) * R);
  be.rows_matmul_forward(m2, m1, w.mlp2_w.f32(kDecodeWeights), w.mlp2_b, n, R, R);
  be.gelu_forward(m2, m2, long(n) * R);
  float* logits = arena.floats(size_t(n) * NR);
  be.rows_matmul_forward(logits, m2, w.mlp4_w.f32(kDecodeWeights), nullptr, n, R, NR);
  float* probs = arena.floats(size_t(n) * NR);
  be.softmax_forward(probs, logits, n, NR);

  // Top-1 choice (top1_route); then the rows of each expert together, in token order.
  be.top1_routes(routes, probs, w.balancing_biases, n, NR);
  int32_t* order = arena.ints(size_t(n));
  int32_t* offsets = arena.ints(size_t(NR) + 1);
  be.sort_by_route(order, offsets, routes, n, NR);
  std::vector<int32_t> off(size_t(NR) + 1);
  be.to_host(off.data(), offsets, sizeof(int32_t) * off.size());
  const int n_exp = off[size_t(X)];
  float* xg = arena.floats(size_t(n) * E);
  float* h1 = arena.floats(size_t(n) * 2 * F);
  float* sw = arena.floats(size_t(n) * F);
  float* y = arena.floats(size_t(n) * E);
  be.gather_rows(xg, x, order, n_exp, E);
  // Every expert's rows in one call per layer: at a batch of 16 most experts get a row or two,
  // and the backend shares all of their weights among its threads at once.
  std::vector<const float*> fc1(static_cast<size_t>(X)), fc2(static_cast<size_t>(X));
  for (size_t e = 0; e < size_t(X); ++e) {
    fc1[e] = w.fc1[e].f32(kDecodeWeights);
    fc2[e] = w.fc2[e].f32(kDecodeWeights);
  }
  be.grouped_rows_matmul_forward(h1, xg, fc1.data(), off.data(), X, E, 2 * F);
  be.swiglu_forward(sw, h1, n_exp, F);
  be.grouped_rows_matmul_forward(y, sw, fc2.data(), off.data(), X, F, E);
  // out[t] = gate · expert output, or gate · x on the skip route (mixture-of-depths).
  be.moe_combine_forward(out, y, x, probs, routes, order, n, n_exp, E, NR);
}

}  // namespace zaya
