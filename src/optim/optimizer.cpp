#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "dist/communicator.h"
#include "dist/rank_sum.h"

namespace zaya {

namespace {

// Elementwise loops go parallel only above this size (thread start-up dominates below it).
constexpr int64_t kParallelMin = 1 << 15;
// Gradient-norm partition: fixed chunks of at most this many floats from each tensor's start,
// whatever the thread count.
constexpr int64_t kNormChunk = 1 << 16;
// Point-to-point tags of the Muon exchange (pieces to the owner, results back).
constexpr int kTagPiece = 7101, kTagResult = 7102;

bool decays(const ParamSpec& p) {
  return p.shape.size() >= 2;
}

}  // namespace

Optimizer::Optimizer(const ParamRegistry& registry, const OptimConfig& config,
                     dist::Communicator* comm)
    : Optimizer(registry.specs(), registry.total_floats(), config, comm) {}

Optimizer::Optimizer(std::vector<ParamSpec> specs, size_t total_floats, const OptimConfig& config,
                     dist::Communicator* comm)
    : specs_(std::move(specs)), total_(total_floats), config_(config), comm_(comm) {
  config_.validate("Optimizer");
  if (!config_.muon)
    for (ParamSpec& p : specs_)
      if (p.group == OptimGroup::Muon) p.group = OptimGroup::AdamW;
  shard_.total = int64_t(total_);
  if (comm_ != nullptr) {
    shard_.world = comm_->world_size();
    shard_.rank = comm_->rank();
  }
  for (const ParamSpec& p : specs_) {
    ZAYA_CHECK(p.numel == shape_numel(p.shape) && p.offset + size_t(p.numel) <= total_,
               "Optimizer: tensor '", p.name, "' ", shape_str(p.shape), " at offset ", p.offset,
               " does not fit the flat buffer of ", total_, " floats");
    ZAYA_CHECK(p.group != OptimGroup::Muon || p.shape.size() == 2, "Optimizer: Muon tensor '",
               p.name, "' must be a 2-D matrix, got ", shape_str(p.shape));
  }
  muon_ = plan_muon(specs_, shard_);
  exp_avg_ = Tensor({shard_.size()}, DType::F32);
  exp_avg_sq_ = Tensor({shard_.size()}, DType::F32);
  direction_.resize(size_t(shard_.size()));
  owned_.resize(size_t(muon_.owned_floats));
}

float Optimizer::step(ParamStore& store, double lr) {
  ZAYA_CHECK(store.size() == total_, "Optimizer::step: the store holds ", store.size(),
             " floats, the optimizer was built for ", total_);
  ZAYA_CHECK(shard_.world == 1, "Optimizer::step(ParamStore&) is for one process; with ",
             shard_.world, " ranks pass the reduce-scattered shard gradients");
  return step(store.weights(), store.grads(), lr);
}

double Optimizer::grad_norm(const float* shard_grads) const {
  struct Chunk {
    int64_t begin, count;
  };
  std::vector<Chunk> chunks;
  for (const ParamSpec& p : specs_) {
    if (!p.trainable()) continue;
    const FlatPiece mine = piece_of(p, shard_, shard_.rank);
    for (int64_t i = int64_t(p.offset); i < int64_t(p.offset) + p.numel; i += kNormChunk) {
      const int64_t b = std::max(i, mine.begin);
      const int64_t e = std::min(i + kNormChunk, mine.end);
      if (b < e) chunks.push_back({b - shard_.begin(), e - b});
    }
  }
  std::vector<double> partial(chunks.size(), 0.0);
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < int64_t(chunks.size()); ++k) {
    const float* g = shard_grads + chunks[size_t(k)].begin;
    double s = 0;
    for (int64_t i = 0; i < chunks[size_t(k)].count; ++i) s += double(g[i]) * double(g[i]);
    partial[size_t(k)] = s;
  }
  double total = 0;
  for (double s : partial) total += s;  // fixed order
  dist::sum_over_ranks(comm_, std::span<double>(&total, 1));
  return std::sqrt(total);
}

float Optimizer::step(float* weights, float* shard_grads, double lr) {
  const double norm = grad_norm(shard_grads);
  if (!std::isfinite(norm)) return float(norm);
  if (config_.grad_clip > 0 && norm > config_.grad_clip) {
    const float scale = float(config_.grad_clip / norm);
    for (const ParamSpec& p : specs_) {
      if (!p.trainable()) continue;
      const FlatPiece mine = piece_of(p, shard_, shard_.rank);
      float* g = shard_grads + (mine.begin - shard_.begin());
      const int64_t n = mine.end - mine.begin;
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
      for (int64_t i = 0; i < n; ++i) g[i] *= scale;
    }
  }
  ++step_count_;
  for (const ParamSpec& p : specs_)
    if (p.group == OptimGroup::AdamW) adamw_update(p, weights, shard_grads, lr);
  muon_step(weights, shard_grads, lr);
  return float(norm);
}

void Optimizer::adamw_update(const ParamSpec& p, float* weights, const float* shard_grads,
                             double lr) {
  const FlatPiece mine = piece_of(p, shard_, shard_.rank);
  const int64_t n = mine.end - mine.begin;
  if (n == 0) return;
  const double t = double(step_count_);
  const float beta1 = float(config_.adam_beta1), one_minus_beta1 = float(1 - config_.adam_beta1);
  const float beta2 = float(config_.adam_beta2), one_minus_beta2 = float(1 - config_.adam_beta2);
  const float keep = decays(p) ? float(1.0 - lr * config_.weight_decay) : 1.0f;
  const float step_size = float(lr / (1.0 - std::pow(config_.adam_beta1, t)));
  const float inv_sqrt_bc2 = float(1.0 / std::sqrt(1.0 - std::pow(config_.adam_beta2, t)));
  const float eps = float(config_.adam_eps);
  const int64_t local = mine.begin - shard_.begin();
  float* w = weights + mine.begin;
  const float* g = shard_grads + local;
  float* m = exp_avg_.data<float>() + local;
  float* v = exp_avg_sq_.data<float>() + local;
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    m[i] = beta1 * m[i] + one_minus_beta1 * g[i];
    v[i] = beta2 * v[i] + one_minus_beta2 * g[i] * g[i];
    w[i] = w[i] * keep - step_size * m[i] / (std::sqrt(v[i]) * inv_sqrt_bc2 + eps);
  }
}

void Optimizer::muon_step(float* weights, const float* shard_grads, double lr) {
  if (muon_.matrices.empty()) return;
  const float beta = float(config_.muon_momentum),
              one_minus_beta = float(1 - config_.muon_momentum);
  const bool nesterov = config_.muon_nesterov;
  for (const MuonPlan::Matrix& m : muon_.matrices) {
    const FlatPiece mine = piece_of(specs_[m.spec], shard_, shard_.rank);
    const int64_t n = mine.size(), local = mine.begin - shard_.begin();
    float* buf = exp_avg_.data<float>() + local;
    const float* g = shard_grads + local;
    float* d = direction_.data() + local;
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
    for (int64_t i = 0; i < n; ++i) {
      buf[i] = beta * buf[i] + one_minus_beta * g[i];
      d[i] = nesterov ? one_minus_beta * g[i] + beta * buf[i] : buf[i];
    }
  }
  exchange_pieces(/*to_owners=*/true);
  for (const MuonPlan::Matrix& m : muon_.matrices) {
    if (m.owner != shard_.rank) continue;
    const ParamSpec& p = specs_[m.spec];
    float* whole = owned_.data() + m.owned_offset;
    newton_schulz(whole, whole, p.shape[0], p.shape[1], int(config_.muon_ns_steps), ns_);
  }
  exchange_pieces(/*to_owners=*/false);
  const float keep = float(1.0 - lr * config_.weight_decay);
  for (const MuonPlan::Matrix& m : muon_.matrices) {
    const ParamSpec& p = specs_[m.spec];
    const FlatPiece mine = piece_of(p, shard_, shard_.rank);
    const int64_t n = mine.size();
    const float step_size = float(lr * 0.2 * std::sqrt(double(std::max(p.shape[0], p.shape[1]))));
    const float* d = direction_.data() + (mine.begin - shard_.begin());
    float* w = weights + mine.begin;
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
    for (int64_t i = 0; i < n; ++i) w[i] = w[i] * keep - step_size * d[i];
  }
}

// Moves pieces between the holders' direction_ and the owners' owned_ buffers. Every rank walks
// the matrices in registry order and an owner takes its holders in rank order, so each blocking
// send meets its receive: the first matrix in that order whose exchange has not finished has
// every participant at it.
void Optimizer::exchange_pieces(bool to_owners) {
  for (const MuonPlan::Matrix& m : muon_.matrices) {
    const ParamSpec& p = specs_[m.spec];
    const int first = shard_.owner_of(int64_t(p.offset));
    const int last = shard_.owner_of(int64_t(p.offset) + p.numel - 1);
    const FlatPiece mine = piece_of(p, shard_, shard_.rank);
    float* local = direction_.data() + (mine.begin - shard_.begin());
    if (m.owner != shard_.rank) {
      if (mine.size() == 0) continue;
      const size_t n = size_t(mine.size());
      if (to_owners)
        comm_->send(local, n, DType::F32, m.owner, kTagPiece);
      else
        comm_->recv(local, n, DType::F32, m.owner, kTagResult);
      continue;
    }
    float* whole = owned_.data() + m.owned_offset;
    for (int r = first; r <= last; ++r) {
      const FlatPiece pc = piece_of(p, shard_, r);
      float* at = whole + (pc.begin - int64_t(p.offset));
      const size_t n = size_t(pc.size());
      if (r == shard_.rank) {
        if (to_owners)
          std::copy_n(local, n, at);
        else
          std::copy_n(at, n, local);
      } else if (to_owners) {
        comm_->recv(at, n, DType::F32, r, kTagPiece);
      } else {
        comm_->send(at, n, DType::F32, r, kTagResult);
      }
    }
  }
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
    std::memcpy(dst.data<float>(), src.data<float>() + shard_.begin(),
                size_t(shard_.size()) * sizeof(float));
  }
  step_count_ = step_count;
}

void Optimizer::set_step_count(int64_t step_count) {
  ZAYA_CHECK(step_count >= 0, "Optimizer::set_step_count: step count must be >= 0, got ",
             step_count);
  step_count_ = step_count;
}

}  // namespace zaya
