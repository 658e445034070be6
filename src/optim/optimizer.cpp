#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"

namespace zaya {

namespace {

// Elementwise loops go parallel only above this size (thread start-up dominates below it).
constexpr int64_t kParallelMin = 1 << 15;
// Gradient-norm partition: fixed chunks of at most this many floats, whatever the thread count.
constexpr int64_t kNormChunk = 1 << 16;

bool decays(const ParamSpec& p) {
  return p.shape.size() >= 2;
}

}  // namespace

Optimizer::Optimizer(const ParamRegistry& registry, const OptimConfig& config)
    : Optimizer(registry.specs(), registry.total_floats(), config) {}

Optimizer::Optimizer(std::vector<ParamSpec> specs, size_t total_floats, const OptimConfig& config)
    : specs_(std::move(specs)), total_(total_floats), config_(config) {
  config_.validate("Optimizer");
  size_t largest_muon = 0;
  for (const ParamSpec& p : specs_) {
    ZAYA_CHECK(p.numel == shape_numel(p.shape) && p.offset + size_t(p.numel) <= total_,
               "Optimizer: tensor '", p.name, "' ", shape_str(p.shape), " at offset ", p.offset,
               " does not fit the flat buffer of ", total_, " floats");
    if (p.group == OptimGroup::Muon) {
      ZAYA_CHECK(p.shape.size() == 2, "Optimizer: Muon tensor '", p.name,
                 "' must be a 2-D matrix, got ", shape_str(p.shape));
      largest_muon = std::max(largest_muon, size_t(p.numel));
    }
  }
  exp_avg_ = Tensor({int64_t(total_)}, DType::F32);
  exp_avg_sq_ = Tensor({int64_t(total_)}, DType::F32);
  direction_.resize(largest_muon);
}

float Optimizer::step(ParamStore& store, double lr) {
  ZAYA_CHECK(store.size() == total_, "Optimizer::step: the store holds ", store.size(),
             " floats, the optimizer was built for ", total_);
  return step(store.weights(), store.grads(), lr);
}

double Optimizer::grad_norm(const float* grads) const {
  struct Chunk {
    size_t begin;
    int64_t count;
  };
  std::vector<Chunk> chunks;
  for (const ParamSpec& p : specs_) {
    if (!p.trainable()) continue;
    for (int64_t i = 0; i < p.numel; i += kNormChunk)
      chunks.push_back({p.offset + size_t(i), std::min(kNormChunk, p.numel - i)});
  }
  std::vector<double> partial(chunks.size(), 0.0);
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < int64_t(chunks.size()); ++k) {
    const float* g = grads + chunks[size_t(k)].begin;
    double s = 0;
    for (int64_t i = 0; i < chunks[size_t(k)].count; ++i) s += double(g[i]) * double(g[i]);
    partial[size_t(k)] = s;
  }
  double total = 0;
  for (double s : partial) total += s;  // fixed order
  return std::sqrt(total);
}

float Optimizer::step(float* weights, float* grads, double lr) {
  const double norm = grad_norm(grads);
  if (!std::isfinite(norm)) return float(norm);
  if (config_.grad_clip > 0 && norm > config_.grad_clip) {
    const float scale = float(config_.grad_clip / norm);
    for (const ParamSpec& p : specs_) {
      if (!p.trainable()) continue;
      float* g = grads + p.offset;
#pragma omp parallel for schedule(static) if (p.numel >= kParallelMin)
      for (int64_t i = 0; i < p.numel; ++i) g[i] *= scale;
    }
  }
  ++step_count_;
  for (const ParamSpec& p : specs_) {
    if (p.group == OptimGroup::AdamW) adamw_update(p, weights + p.offset, grads + p.offset, lr);
    if (p.group == OptimGroup::Muon) muon_update(p, weights + p.offset, grads + p.offset, lr);
  }
  return float(norm);
}

void Optimizer::adamw_update(const ParamSpec& p, float* w, const float* g, double lr) {
  const double t = double(step_count_);
  const float beta1 = float(config_.adam_beta1), one_minus_beta1 = float(1 - config_.adam_beta1);
  const float beta2 = float(config_.adam_beta2), one_minus_beta2 = float(1 - config_.adam_beta2);
  const float keep = decays(p) ? float(1.0 - lr * config_.weight_decay) : 1.0f;
  const float step_size = float(lr / (1.0 - std::pow(config_.adam_beta1, t)));
  const float inv_sqrt_bc2 = float(1.0 / std::sqrt(1.0 - std::pow(config_.adam_beta2, t)));
  const float eps = float(config_.adam_eps);
  float* m = exp_avg_.data<float>() + p.offset;
  float* v = exp_avg_sq_.data<float>() + p.offset;
#pragma omp parallel for schedule(static) if (p.numel >= kParallelMin)
  for (int64_t i = 0; i < p.numel; ++i) {
    m[i] = beta1 * m[i] + one_minus_beta1 * g[i];
    v[i] = beta2 * v[i] + one_minus_beta2 * g[i] * g[i];
    w[i] = w[i] * keep - step_size * m[i] / (std::sqrt(v[i]) * inv_sqrt_bc2 + eps);
  }
}

void Optimizer::muon_update(const ParamSpec& p, float* w, const float* g, double lr) {
  const int64_t rows = p.shape[0], cols = p.shape[1];
  const float beta = float(config_.muon_momentum),
              one_minus_beta = float(1 - config_.muon_momentum);
  float* buf = exp_avg_.data<float>() + p.offset;
  float* d = direction_.data();
  const bool nesterov = config_.muon_nesterov;
#pragma omp parallel for schedule(static) if (p.numel >= kParallelMin)
  for (int64_t i = 0; i < p.numel; ++i) {
    buf[i] = beta * buf[i] + one_minus_beta * g[i];
    d[i] = nesterov ? one_minus_beta * g[i] + beta * buf[i] : buf[i];
  }
  newton_schulz(d, d, rows, cols, int(config_.muon_ns_steps), ns_);
  const float keep = float(1.0 - lr * config_.weight_decay);
  const float step_size = float(lr * 0.2 * std::sqrt(double(std::max(rows, cols))));
#pragma omp parallel for schedule(static) if (p.numel >= kParallelMin)
  for (int64_t i = 0; i < p.numel; ++i) w[i] = w[i] * keep - step_size * d[i];
}

std::map<std::string, Tensor> Optimizer::state_tensors() const {
  return {{"exp_avg", exp_avg_}, {"exp_avg_sq", exp_avg_sq_}};
}

void Optimizer::load_state(const std::map<std::string, Tensor>& state, int64_t step_count) {
  ZAYA_CHECK(step_count >= 0, "Optimizer::load_state: step count must be >= 0, got ", step_count);
  ZAYA_CHECK(state.size() == 2,
             "Optimizer::load_state: expected exactly 'exp_avg' and "
             "'exp_avg_sq', got ",
             state.size(), " tensors");
  for (const auto& [name, dst] : state_tensors()) {
    const auto it = state.find(name);
    ZAYA_CHECK(it != state.end(), "Optimizer::load_state: missing state tensor '", name, "'");
    const Tensor& src = it->second;
    ZAYA_CHECK(src.dtype() == DType::F32 && src.numel() == int64_t(total_),
               "Optimizer::load_state: '", name, "' must be F32 with ", total_, " elements, got ",
               dtype_name(src.dtype()), " ", shape_str(src.shape()));
    std::memcpy(dst.data<float>(), src.data<float>(), total_ * sizeof(float));
  }
  step_count_ = step_count;
}

}  // namespace zaya
