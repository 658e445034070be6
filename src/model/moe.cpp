#include "model/moe.h"

namespace zaya {

namespace {

// The router's RMSNorm and its MLP's two GELUs, from act.state, act.m1_pre and act.m2_pre.
void router_norm_forward(MoeActivations& act, const MoeWeights& w, const ModelConfig& c, int N,
                         Arena& arena, const Backend& be) {
  const int R = int(c.router_dim);
  act.rstd = arena.floats(N);
  act.hn = arena.floats(size_t(N) * R);
  be.rmsnorm_forward(act.hn, act.rstd, act.state, w.rms_w, N, R, float(c.router_norm_eps));
}

// The buffers selective recompute drops (moe.h), made from the kept ones: the router's norm,
// GELUs and softmax, the experts' gathered inputs and their SwiGLU. Not the norm (the forward
// needs hn before m1_pre exists).
void after_products_forward(MoeActivations& act, const ModelConfig& c, int N, Arena& arena,
                            const Backend& be) {
  const int E = int(c.hidden_size), R = int(c.router_dim), X = int(c.num_experts), NR = X + 1;
  const int F = int(c.expert_hidden), n_exp = act.host_offsets[size_t(X)];
  act.m1 = arena.floats(size_t(N) * R);
  be.gelu_forward(act.m1, act.m1_pre, long(N) * R);
  act.m2 = arena.floats(size_t(N) * R);
  be.gelu_forward(act.m2, act.m2_pre, long(N) * R);
  act.probs = arena.floats(size_t(N) * NR);
  be.softmax_forward(act.probs, act.logits, N, NR);
  act.xg = arena.floats(size_t(n_exp) * E);
  be.gather_rows(act.xg, act.x, act.order, n_exp, E);
  act.sw = arena.floats(size_t(n_exp) * F);
  be.swiglu_forward(act.sw, act.h1, n_exp, F);
}

}  // namespace

void moe_forward(float* out, MoeActivations& act, const float* x, const float* state_in,
                 const MoeWeights& w, const ModelConfig& c, int N, Arena& arena,
                 const int32_t* held_route, const Backend& be, Arena* transient) {
  const int E = int(c.hidden_size), R = int(c.router_dim), X = int(c.num_experts), NR = X + 1;
  const int F = int(c.expert_hidden);
  Arena& cheap = transient ? *transient : arena;  // what selective recompute drops
  act.x = x;
  act.state_in = state_in;

  // Router 1-2: down-projection with bias, then EDA: r_l = r + γ ⊙ r_{l-1}.
  act.state = arena.floats(size_t(N) * R);
  be.matmul_forward(act.state, x, w.down_w, w.down_b, N, E, R);
  if (w.states_scale && state_in) be.eda_forward(act.state, w.states_scale, state_in, N, R);
  // 3-5: RMSNorm (eps 1e-6), GELU MLP, softmax over X+1 routes.
  router_norm_forward(act, w, c, N, cheap, be);
  act.m1_pre = arena.floats(size_t(N) * R);
  act.m1 = cheap.floats(size_t(N) * R);
  act.m2_pre = arena.floats(size_t(N) * R);
  act.m2 = cheap.floats(size_t(N) * R);
  be.matmul_forward(act.m1_pre, act.hn, w.mlp0_w, w.mlp0_b, N, R, R);
  be.gelu_forward(act.m1, act.m1_pre, long(N) * R);
  be.matmul_forward(act.m2_pre, act.m1, w.mlp2_w, w.mlp2_b, N, R, R);
  be.gelu_forward(act.m2, act.m2_pre, long(N) * R);
  act.logits = arena.floats(size_t(N) * NR);
  be.matmul_forward(act.logits, act.m2, w.mlp4_w, nullptr, N, R, NR);
  act.probs = cheap.floats(size_t(N) * NR);
  be.softmax_forward(act.probs, act.logits, N, NR);

  // 6. Top-1 choice (top1_route), unless the test hook holds the routes.
  act.route = arena.ints(N);
  if (held_route)
    be.to_device(act.route, held_route, sizeof(int32_t) * size_t(N));
  else
    be.top1_routes(act.route, act.probs, w.balancing_biases, N, NR);
  // Group tokens by route, keeping token order inside a route (deterministic; dropless). The
  // expert products need the groups' row ranges on the host: one explicit copy.
  act.offsets = arena.ints(NR + 1);
  act.order = arena.ints(N);
  be.sort_by_route(act.order, act.offsets, act.route, N, NR);
  act.host_offsets.resize(size_t(NR) + 1);
  be.to_host(act.host_offsets.data(), act.offsets, sizeof(int32_t) * (size_t(NR) + 1));
  const int n_exp = act.host_offsets[size_t(X)];  // tokens routed to a real expert
  // 7. Experts: gather, SwiGLU MLP per expert (grouped GEMM), scale by the gate, scatter.
  act.xg = cheap.floats(size_t(n_exp) * E);
  be.gather_rows(act.xg, x, act.order, n_exp, E);
  act.h1 = arena.floats(size_t(n_exp) * 2 * F);
  act.sw = cheap.floats(size_t(n_exp) * F);
  act.y = arena.floats(size_t(n_exp) * E);
  be.grouped_matmul_forward(act.h1, act.xg, w.fc1.data(), act.host_offsets.data(), X, E, 2 * F);
  be.swiglu_forward(act.sw, act.h1, n_exp, F);
  be.grouped_matmul_forward(act.y, act.sw, w.fc2.data(), act.host_offsets.data(), X, F, E);
  be.moe_combine_forward(out, act.y, x, act.probs, act.route, act.order, N, n_exp, E, NR);
  if (transient) act.rstd = act.hn = act.m1 = act.m2 = act.probs = act.xg = act.sw = nullptr;
}

void moe_rebuild(MoeActivations& act, const MoeWeights& w, const ModelConfig& c, int N,
                 Arena& arena, const Backend& be) {
  router_norm_forward(act, w, c, N, arena, be);
  after_products_forward(act, c, N, arena, be);
}

void visit_saved(MoeActivations& act, const ModelConfig& c, int N, SavedBuffers& visit) {
  const size_t E = c.hidden_size, R = c.router_dim, NR = size_t(c.num_routes());
  const size_t F = c.expert_hidden, n_exp = size_t(act.host_offsets[size_t(c.num_experts)]);
  // The router (small: router_dim wide) decides the routes and the gates: kept exact.
  const auto router = SavedKind::kFp32;
  visit.floats(act.state, N * R, router);
  visit.floats(act.rstd, size_t(N), router);
  visit.floats(act.hn, N * R, router);
  visit.floats(act.m1_pre, N * R, router);
  visit.floats(act.m1, N * R, router);
  visit.floats(act.m2_pre, N * R, router);
  visit.floats(act.m2, N * R, router);
  visit.floats(act.logits, N * NR, router);
  visit.floats(act.probs, N * NR, router);
  visit.ints(act.route, size_t(N));
  visit.ints(act.offsets, NR + 1);
  visit.ints(act.order, size_t(N));
  visit.floats(act.xg, n_exp * E, SavedKind::kBulk);
  visit.floats(act.h1, n_exp * 2 * F, SavedKind::kBulk);
  visit.floats(act.sw, n_exp * F, SavedKind::kBulk);
  visit.floats(act.y, n_exp * E, SavedKind::kBulk);
}

void moe_backward(float* dx, float* dstate_in, MoeGrads& g, const float* dout, const float* dstate,
                  const MoeActivations& act, const MoeWeights& w, const ModelConfig& c, int N,
                  Arena& arena, const Backend& be) {
  const int E = int(c.hidden_size), R = int(c.router_dim), X = int(c.num_experts), NR = X + 1;
  const int F = int(c.expert_hidden);
  const int n_exp = act.host_offsets[size_t(X)];

  // Gate: out = p_route · src, so dp_route = dout · src and dsrc = p_route · dout.
  float* dprobs = arena.zeros(size_t(N) * NR);
  float* dy = arena.floats(size_t(n_exp) * E);
  be.moe_combine_backward(dprobs, dy, dx, dout, act.y, act.x, act.probs, act.route, act.order, N,
                          n_exp, E, NR);

  // Experts backward (grouped), then scatter the input gradient back to token order.
  float* dsw = arena.zeros(size_t(n_exp) * F);
  float* dh1 = arena.zeros(size_t(n_exp) * 2 * F);
  float* dxg = arena.zeros(size_t(n_exp) * E);
  be.grouped_matmul_backward(dsw, g.fc2.data(), dy, act.sw, w.fc2.data(), act.host_offsets.data(),
                             X, F, E);
  be.swiglu_backward(dh1, dsw, act.h1, n_exp, F);
  be.grouped_matmul_backward(dxg, g.fc1.data(), dh1, act.xg, w.fc1.data(), act.host_offsets.data(),
                             X, E, 2 * F);
  be.scatter_add_rows(dx, dxg, act.order, n_exp, E);

  // Router backward: softmax, the MLP, RMSNorm, EDA, down-projection.
  float* dlogits = arena.zeros(size_t(N) * NR);
  be.softmax_backward(dlogits, dprobs, act.probs, N, NR);
  float* dm2 = arena.zeros(size_t(N) * R);
  be.matmul_backward(dm2, g.mlp4_w, nullptr, dlogits, act.m2, w.mlp4_w, N, R, NR);
  float* dm2_pre = arena.zeros(size_t(N) * R);
  be.gelu_backward(dm2_pre, dm2, act.m2_pre, long(N) * R);
  float* dm1 = arena.zeros(size_t(N) * R);
  be.matmul_backward(dm1, g.mlp2_w, g.mlp2_b, dm2_pre, act.m1, w.mlp2_w, N, R, R);
  float* dm1_pre = arena.zeros(size_t(N) * R);
  be.gelu_backward(dm1_pre, dm1, act.m1_pre, long(N) * R);
  float* dhn = arena.zeros(size_t(N) * R);
  be.matmul_backward(dhn, g.mlp0_w, g.mlp0_b, dm1_pre, act.hn, w.mlp0_w, N, R, R);
  float* dst = arena.zeros(size_t(N) * R);  // gradient of this stage's router state
  if (dstate) be.copy(dst, dstate, sizeof(float) * size_t(N) * R);
  be.rmsnorm_backward(dst, g.rms_w, dhn, act.state, w.rms_w, act.rstd, N, R);
  if (w.states_scale && act.state_in)
    be.eda_backward(g.states_scale, dstate_in, dst, act.state_in, w.states_scale, N, R);
  be.matmul_backward(dx, g.down_w, g.down_b, dst, act.x, w.down_w, N, E, R);
}

}  // namespace zaya
