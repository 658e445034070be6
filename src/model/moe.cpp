#include "model/moe.h"

#include <cstring>

#include "backend/cpu/activation.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/norm.h"

namespace zaya {

void moe_forward(float* out, MoeActivations& act, const float* x, const float* state_in,
                 const MoeWeights& w, const ModelConfig& c, int N, Arena& arena,
                 const int32_t* held_route) {
  const int E = int(c.hidden_size), R = int(c.router_dim), X = int(c.num_experts), NR = X + 1;
  const int F = int(c.expert_hidden);
  act.x = x;
  act.state_in = state_in;

  // Router 1-2: down-projection with bias, then EDA: r_l = r + γ ⊙ r_{l-1}.
  act.state = arena.floats(size_t(N) * R);
  cpu::matmul_forward(act.state, x, w.down_w, w.down_b, N, E, R);
  if (w.states_scale && state_in) {
#pragma omp parallel for schedule(static)
    for (int t = 0; t < N; ++t)
      for (int j = 0; j < R; ++j)
        act.state[size_t(t) * R + j] += w.states_scale[j] * state_in[size_t(t) * R + j];
  }
  // 3-5: RMSNorm (eps 1e-6), GELU MLP, softmax over X+1 routes.
  act.rstd = arena.floats(N);
  act.hn = arena.floats(size_t(N) * R);
  cpu::rmsnorm_forward(act.hn, act.rstd, act.state, w.rms_w, N, R, float(c.router_norm_eps));
  act.m1_pre = arena.floats(size_t(N) * R);
  act.m1 = arena.floats(size_t(N) * R);
  act.m2_pre = arena.floats(size_t(N) * R);
  act.m2 = arena.floats(size_t(N) * R);
  cpu::matmul_forward(act.m1_pre, act.hn, w.mlp0_w, w.mlp0_b, N, R, R);
  cpu::gelu_forward(act.m1, act.m1_pre, long(N) * R);
  cpu::matmul_forward(act.m2_pre, act.m1, w.mlp2_w, w.mlp2_b, N, R, R);
  cpu::gelu_forward(act.m2, act.m2_pre, long(N) * R);
  float* logits = arena.floats(size_t(N) * NR);
  cpu::matmul_forward(logits, act.m2, w.mlp4_w, nullptr, N, R, NR);
  act.probs = arena.floats(size_t(N) * NR);
  cpu::softmax_forward(act.probs, logits, N, NR);

  // 6. Top-1 choice (top1_route), unless the test hook holds the routes.
  act.route = arena.ints(N);
  for (int t = 0; t < N; ++t)
    act.route[t] =
        held_route ? held_route[t] : top1_route(act.probs + size_t(t) * NR, w.balancing_biases, NR);
  // Group tokens by route, keeping token order inside a route (deterministic; dropless).
  act.offsets = arena.ints(NR + 1);
  std::fill(act.offsets, act.offsets + NR + 1, 0);
  for (int t = 0; t < N; ++t) ++act.offsets[act.route[t] + 1];
  for (int e = 0; e < NR; ++e) act.offsets[e + 1] += act.offsets[e];
  act.order = arena.ints(N);
  {
    std::vector<int32_t> fill(act.offsets, act.offsets + NR);
    for (int t = 0; t < N; ++t) act.order[fill[act.route[t]]++] = t;
  }
  const int n_exp = act.offsets[X];  // tokens routed to a real expert

  // 7. Experts: gather, SwiGLU MLP per expert (grouped GEMM), scale by the gate, scatter.
  act.xg = arena.floats(size_t(n_exp) * E);
#pragma omp parallel for schedule(static)
  for (int i = 0; i < n_exp; ++i)
    std::memcpy(act.xg + size_t(i) * E, x + size_t(act.order[i]) * E, sizeof(float) * E);
  act.h1 = arena.floats(size_t(n_exp) * 2 * F);
  act.sw = arena.floats(size_t(n_exp) * F);
  act.y = arena.floats(size_t(n_exp) * E);
  cpu::grouped_matmul_forward(act.h1, act.xg, w.fc1.data(), act.offsets, X, E, 2 * F);
  cpu::swiglu_forward(act.sw, act.h1, n_exp, F);
  cpu::grouped_matmul_forward(act.y, act.sw, w.fc2.data(), act.offsets, X, F, E);
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    const int t = act.order[i];
    const float gate = act.probs[size_t(t) * NR + act.route[t]];
    // Real expert: gate · expert(x). Skip route (mixture-of-depths): gate · x.
    const float* src = i < n_exp ? act.y + size_t(i) * E : x + size_t(t) * E;
    float* o = out + size_t(t) * E;
    for (int j = 0; j < E; ++j) o[j] = gate * src[j];
  }
}

void moe_backward(float* dx, float* dstate_in, MoeGrads& g, const float* dout, const float* dstate,
                  const MoeActivations& act, const MoeWeights& w, const ModelConfig& c, int N,
                  Arena& arena) {
  const int E = int(c.hidden_size), R = int(c.router_dim), X = int(c.num_experts), NR = X + 1;
  const int F = int(c.expert_hidden);
  const int n_exp = act.offsets[X];

  // Gate: out = p_route · src, so dp_route = dout · src and dsrc = p_route · dout.
  float* dprobs = arena.zeros(size_t(N) * NR);
  float* dy = arena.floats(size_t(n_exp) * E);
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    const int t = act.order[i];
    const float gate = act.probs[size_t(t) * NR + act.route[t]];
    const float* d = dout + size_t(t) * E;
    const float* src = i < n_exp ? act.y + size_t(i) * E : act.x + size_t(t) * E;
    double dot = 0.0;
    for (int j = 0; j < E; ++j) dot += double(d[j]) * src[j];
    dprobs[size_t(t) * NR + act.route[t]] = float(dot);
    if (i < n_exp) {
      for (int j = 0; j < E; ++j) dy[size_t(i) * E + j] = gate * d[j];
    } else {
      for (int j = 0; j < E; ++j) dx[size_t(t) * E + j] += gate * d[j];
    }
  }

  // Experts backward (grouped), then scatter the input gradient back to token order.
  float* dsw = arena.zeros(size_t(n_exp) * F);
  float* dh1 = arena.zeros(size_t(n_exp) * 2 * F);
  float* dxg = arena.zeros(size_t(n_exp) * E);
  cpu::grouped_matmul_backward(dsw, g.fc2.data(), dy, act.sw, w.fc2.data(), act.offsets, X, F, E);
  cpu::swiglu_backward(dh1, dsw, act.h1, n_exp, F);
  cpu::grouped_matmul_backward(dxg, g.fc1.data(), dh1, act.xg, w.fc1.data(), act.offsets, X, E,
                               2 * F);
#pragma omp parallel for schedule(static)
  for (int i = 0; i < n_exp; ++i) {
    float* d = dx + size_t(act.order[i]) * E;
    for (int j = 0; j < E; ++j) d[j] += dxg[size_t(i) * E + j];
  }

  // Router backward: softmax, the MLP, RMSNorm, EDA, down-projection.
  float* dlogits = arena.zeros(size_t(N) * NR);
  cpu::softmax_backward(dlogits, dprobs, act.probs, N, NR);
  float* dm2 = arena.zeros(size_t(N) * R);
  cpu::matmul_backward(dm2, g.mlp4_w, nullptr, dlogits, act.m2, w.mlp4_w, N, R, NR);
  float* dm2_pre = arena.zeros(size_t(N) * R);
  cpu::gelu_backward(dm2_pre, dm2, act.m2_pre, long(N) * R);
  float* dm1 = arena.zeros(size_t(N) * R);
  cpu::matmul_backward(dm1, g.mlp2_w, g.mlp2_b, dm2_pre, act.m1, w.mlp2_w, N, R, R);
  float* dm1_pre = arena.zeros(size_t(N) * R);
  cpu::gelu_backward(dm1_pre, dm1, act.m1_pre, long(N) * R);
  float* dhn = arena.zeros(size_t(N) * R);
  cpu::matmul_backward(dhn, g.mlp0_w, g.mlp0_b, dm1_pre, act.hn, w.mlp0_w, N, R, R);
  float* dst = arena.zeros(size_t(N) * R);  // gradient of this stage's router state
  if (dstate) std::memcpy(dst, dstate, sizeof(float) * size_t(N) * R);
  cpu::rmsnorm_backward(dst, g.rms_w, dhn, act.state, w.rms_w, act.rstd, N, R);
  if (w.states_scale && act.state_in) {
    // r_l = r + γ ⊙ r_{l-1}: dγ = Σ dr_l ⊙ r_{l-1}, dr_{l-1} += γ ⊙ dr_l.
#pragma omp parallel for schedule(static)
    for (int j = 0; j < R; ++j) {
      double s = 0.0;
      for (int t = 0; t < N; ++t)
        s += double(dst[size_t(t) * R + j]) * act.state_in[size_t(t) * R + j];
      g.states_scale[j] += float(s);
    }
    if (dstate_in) {
#pragma omp parallel for schedule(static)
      for (int t = 0; t < N; ++t)
        for (int j = 0; j < R; ++j)
          dstate_in[size_t(t) * R + j] += w.states_scale[j] * dst[size_t(t) * R + j];
    }
  }
  cpu::matmul_backward(dx, g.down_w, g.down_b, dst, act.x, w.down_w, N, E, R);
}

}  // namespace zaya
