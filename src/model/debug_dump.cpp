#include "model/debug_dump.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/rng.h"
#include "io/safetensors.h"
#include "model/weights_io.h"
#include "model/zaya_model.h"

namespace zaya {

namespace {

// Moves every "init-trivial" tensor (ones, zeros) to random values near its init, and makes the
// router's logits spread so that every route is taken.
void perturb(ZayaModel& model, uint64_t seed) {
  ParamStore& ps = model.params();
  for (const ParamSpec& s : ps.registry().specs()) {
    const Philox rng(seed ^ 0x5eedULL, hash_name(s.name.c_str()));
    float* p = ps.weights() + s.offset;
    // Token-dependent signals must dominate the per-channel biases, or every token looks alike
    // to the router: unit-variance embeddings and router weights scaled to their fan-in.
    const bool router_w = s.name.find("router") != std::string::npos && s.shape.size() == 2;
    const bool embedding = s.name == "model.embed_tokens.weight";
    for (int64_t k = 0; k < s.numel; ++k) {
      const float n = rng.normal(uint64_t(k));
      if (embedding)
        p[k] = n;
      else if (router_w)
        p[k] = n / std::sqrt(float(s.shape.back())) * 2.0f;
      else if (s.init == InitKind::Ones)
        p[k] = 1.0f + 0.2f * n;
      else if (s.init == InitKind::Zeros)
        p[k] = 0.05f * n;
    }
  }
}

// Adjusts the balancing biases until every route of every MoE stage is taken by at least one token
// whose position carries a loss (s < S-1): a route taken only at the last position would have an
// all-zero gradient and test nothing. Greedy: for a missing route, raise its bias just enough
// (plus a clear margin, so no near-tie can flip between implementations) to win the labelled
// token where it is closest to winning, taken from a route that has more than one token.
void spread_routes(ZayaModel& model, const std::vector<int32_t>& tokens,
                   const std::vector<int32_t>& targets, int B, int S) {
  const ModelConfig& c = model.config();
  const int NR = int(c.num_routes()), N = B * S;
  ParamStore& ps = model.params();
  for (int iter = 0; iter < 100; ++iter) {
    model.forward(tokens, targets, B, S);
    bool changed = false;
    for (int i = 1; i < c.num_stages && !changed; i += 2) {
      std::vector<int> count(NR, 0);
      const auto routes = model.routes(i);
      const auto probs = model.route_probs(i);
      for (int t = 0; t < N; ++t)
        if (t % S != S - 1) ++count[routes[t]];
      float* bias = ps.weight_ptr("model.layers." + std::to_string(i) +
                                  ".zaya_block.router.balancing_biases");
      for (int e = 0; e < NR && !changed; ++e) {
        if (count[e] > 0) continue;
        float best_gap = INFINITY;
        for (int t = 0; t < N; ++t) {
          if (t % S == S - 1 || count[routes[t]] < 2) continue;
          const float* p = probs.data() + size_t(t) * NR;
          const float gap = (p[routes[t]] + bias[routes[t]]) - (p[e] + bias[e]);
          best_gap = std::min(best_gap, gap);
        }
        ZAYA_CHECK(best_gap < INFINITY, "debug-dump: too few tokens to reach every route; use a ",
                   "larger --batch or --seq");
        bias[e] += best_gap + 0.01f;
        changed = true;
      }
    }
    if (!changed) return;
  }
  ZAYA_FAIL("debug-dump: could not make every route reach a labelled token; use a larger --batch ",
            "or --seq");
}

}  // namespace

void debug_dump(const ModelConfig& config, const DumpOptions& opt, const std::string& dir) {
  namespace fs = std::filesystem;
  ZayaModel model(config);
  model.params().init(opt.seed);
  perturb(model, opt.seed);
  const int B = opt.batch, S = opt.seq, N = B * S;
  std::vector<int32_t> tokens(N);
  const Philox rng(opt.seed, hash_name("debug-dump tokens"));
  for (int t = 0; t < N; ++t)
    tokens[t] = int32_t(rng.words(uint64_t(t))[0] % uint32_t(config.vocab_size));
  const std::vector<int32_t> targets = ZayaModel::shifted_targets(tokens, B, S);
  spread_routes(model, tokens, targets, B, S);

  const float loss = model.forward(tokens, targets, B, S);
  std::vector<std::pair<std::string, Tensor>> out;
  Tensor tok({B, S}, DType::I32);
  std::memcpy(tok.raw(), tokens.data(), tokens.size() * 4);
  out.emplace_back("tokens", tok);
  Tensor logits({B, S, config.vocab_size}, DType::F32);
  std::memcpy(logits.raw(), model.logits().data(), logits.nbytes());
  out.emplace_back("logits", logits);
  Tensor loss_t({1}, DType::F32);
  loss_t.data<float>()[0] = loss;
  out.emplace_back("loss", loss_t);
  for (int i = 1; i < config.num_stages; i += 2) {
    Tensor r({N}, DType::I32);
    std::memcpy(r.raw(), model.routes(i).data(), size_t(N) * 4);
    out.emplace_back("routes." + std::to_string(i), r);
  }
  model.params().zero_grads();
  model.backward();
  for (const ParamSpec& s : model.params().registry().specs())
    if (s.trainable()) out.emplace_back("grad." + s.name, model.params().grad(s.name).clone());
  fs::create_directories(dir);
  save_model_dir((fs::path(dir) / "model").string(), model);
  write_safetensors((fs::path(dir) / "outputs.safetensors").string(), out);
}

}  // namespace zaya
