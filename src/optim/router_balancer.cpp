#include "optim/router_balancer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"

namespace zaya {

namespace {
constexpr double kBiasEps = 1e-8;  // ZAYA1: the bias controller's AdamW epsilon
const std::string kBiasSuffix = "router.balancing_biases";
}  // namespace

RouterBalancer::RouterBalancer(const ParamRegistry& registry, const OptimConfig& config)
    : config_(config) {
  config_.validate("RouterBalancer");
  for (const ParamSpec& p : registry.specs()) {
    if (!p.name.ends_with(kBiasSuffix)) continue;
    ZAYA_CHECK(p.shape.size() == 1, "RouterBalancer: '", p.name, "' must be 1-D, got ",
               shape_str(p.shape));
    ZAYA_CHECK(routes_ == 0 || routes_ == p.numel, "RouterBalancer: '", p.name, "' has ", p.numel,
               " routes, earlier stages ", routes_);
    routes_ = p.numel;
    stages_.push_back({p.stage, p.offset, p.name});
  }
  const int64_t n = int64_t(stages_.size());
  exp_avg_ = Tensor({n, routes_}, DType::F32);
  exp_avg_sq_ = Tensor({n, routes_}, DType::F32);
}

void RouterBalancer::update(ParamStore& store, const std::vector<RouteCounts>& counts) {
  update(store.weights(), counts);
}

void RouterBalancer::update(float* weights, const std::vector<RouteCounts>& counts) {
  ZAYA_CHECK(counts.size() == stages_.size(), "RouterBalancer::update: got route counts of ",
             counts.size(), " MoE stages, the model has ", stages_.size());
  ++step_count_;
  const double t = double(step_count_);
  const double beta1 = config_.router_bias_beta1, beta2 = config_.router_bias_beta2;
  const double bc1 = 1 - std::pow(beta1, t), bc2 = 1 - std::pow(beta2, t);
  for (size_t k = 0; k < stages_.size(); ++k) {
    const RouteCounts& c = counts[k];
    ZAYA_CHECK(int64_t(c.size()) == routes_, "RouterBalancer::update: stage ", stages_[k].stage,
               " has ", c.size(), " route counts, expected ", routes_);
    int64_t tokens = 0;
    for (int64_t n : c) {
      ZAYA_CHECK(n >= 0, "RouterBalancer::update: negative route count ", n, " at stage ",
                 stages_[k].stage);
      tokens += n;
    }
    ZAYA_CHECK(tokens > 0, "RouterBalancer::update: no tokens routed at stage ", stages_[k].stage);
    float* b = weights + stages_[k].offset;
    float* m = exp_avg_.data<float>() + k * size_t(routes_);
    float* v = exp_avg_sq_.data<float>() + k * size_t(routes_);
    for (int64_t e = 0; e < routes_; ++e) {
      // The moments are tiny (few routes), so this runs in double and stores fp32.
      const double g = double(c[size_t(e)]) / double(tokens) - 1.0 / double(routes_);
      const double me = beta1 * m[e] + (1 - beta1) * g;
      const double ve = beta2 * v[e] + (1 - beta2) * g * g;
      m[e] = float(me);
      v[e] = float(ve);
      b[e] = float(b[e] - config_.router_bias_lr * (me / bc1) / (std::sqrt(ve / bc2) + kBiasEps));
    }
  }
}

std::map<std::string, Tensor> RouterBalancer::state_tensors() const {
  return {{"router_bias_exp_avg", exp_avg_}, {"router_bias_exp_avg_sq", exp_avg_sq_}};
}

void RouterBalancer::load_state(const std::map<std::string, Tensor>& state, int64_t step_count) {
  ZAYA_CHECK(step_count >= 0, "RouterBalancer::load_state: step count must be >= 0, got ",
             step_count);
  for (const auto& [name, dst] : state_tensors()) {
    const auto it = state.find(name);
    ZAYA_CHECK(it != state.end(), "RouterBalancer::load_state: missing state tensor '", name, "'");
    const Tensor& src = it->second;
    ZAYA_CHECK(src.dtype() == DType::F32 && src.shape() == dst.shape(),
               "RouterBalancer::load_state: '", name, "' must be F32 ", shape_str(dst.shape()),
               ", got ", dtype_name(src.dtype()), " ", shape_str(src.shape()));
    std::memcpy(dst.data<float>(), src.data<float>(), dst.nbytes());
  }
  step_count_ = step_count;
}

void accumulate_routes(RouteCounts& counts, std::span<const int32_t> routes) {
  for (int32_t r : routes) {
    ZAYA_CHECK(r >= 0 && size_t(r) < counts.size(), "accumulate_routes: route ", r, " outside [0, ",
               counts.size(), ")");
    ++counts[size_t(r)];
  }
}

ExpertLoad expert_load(const RouteCounts& counts) {
  ZAYA_CHECK(counts.size() >= 2, "expert_load: need at least one expert and the skip route");
  int64_t tokens = 0;
  for (int64_t n : counts) tokens += n;
  ZAYA_CHECK(tokens > 0, "expert_load: no tokens routed");
  ExpertLoad load;
  for (int64_t n : counts) load.fractions.push_back(double(n) / double(tokens));
  load.skip_fraction = load.fractions.back();
  const auto [lo, hi] = std::minmax_element(counts.begin(), counts.end() - 1);
  load.max_min_ratio =
      *lo == 0 ? std::numeric_limits<double>::infinity() : double(*hi) / double(*lo);
  return load;
}

}  // namespace zaya
