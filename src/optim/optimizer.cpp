#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "dist/rank_sum.h"

namespace zaya {

namespace {

// Gradient-norm partition: fixed chunks of at most this many floats from each tensor's start,
// whatever the thread count and the backend.
constexpr int64_t kNormChunk = 1 << 16;
// Point-to-point tags of the Muon exchange (pieces to the owner, results back).
constexpr int kTagPiece = 7101, kTagResult = 7102;

bool decays(const ParamSpec& p) {
  return p.shape.size() >= 2;
}

}  // namespace

Optimizer::Optimizer(const ParamRegistry& registry, const OptimConfig& config,
                     dist::Communicator* comm, const Backend* backend, dist::Communicator* exchange)
    : Optimizer(registry.specs(), registry.total_floats(), config, comm, backend, exchange) {}

Optimizer::Optimizer(std::vector<ParamSpec> specs, size_t total_floats, const OptimConfig& config,
                     dist::Communicator* comm, const Backend* backend, dist::Communicator* exchange)
    : specs_(std::move(specs)),
      total_(total_floats),
      config_(config),
      comm_(comm),
      exchange_(exchange ? exchange : comm),
      be_(backend ? backend : &cpu_backend()) {
  config_.validate("Optimizer");
  if (!config_.muon)
    for (ParamSpec& p : specs_)
      if (p.group == OptimGroup::Muon) p.group = OptimGroup::AdamW;
  shard_.total = int64_t(total_);
  ZAYA_CHECK(comm_ == nullptr || !comm_->device_memory(),
             "Optimizer: the communicator of the norm (", comm_ ? comm_->kind() : "",
             ") must move host memory; pass the GPU's as `exchange`");
  ZAYA_CHECK(
      exchange_ == nullptr || comm_ == nullptr ||
          (exchange_->world_size() == comm_->world_size() && exchange_->rank() == comm_->rank()),
      "Optimizer: the exchange communicator's ranks differ from the norm's");
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
  const size_t n = size_t(shard_.size()), owned = size_t(muon_.owned_floats);
  if (be_->host_memory()) {
    exp_avg_ = Tensor({shard_.size()}, DType::F32);
    exp_avg_sq_ = Tensor({shard_.size()}, DType::F32);
    m_ = exp_avg_.data<float>();
    v_ = exp_avg_sq_.data<float>();
    host_work_.resize(n + owned);
    direction_ = host_work_.data();
  } else {
    dev_state_ = BackendBuffer(*be_, sizeof(float) * 2 * n);
    be_->fill_zero(dev_state_.floats(), dev_state_.bytes());
    m_ = dev_state_.floats();
    v_ = m_ + n;
    dev_work_ = BackendBuffer(*be_, sizeof(float) * (n + owned));
    be_->fill_zero(dev_work_.floats(), dev_work_.bytes());
    direction_ = dev_work_.floats();
  }
  owned_ = direction_ + n;
  build_tables();
}

void Optimizer::build_tables() {
  for (size_t s = 0; s < specs_.size(); ++s) {
    const ParamSpec& p = specs_[s];
    if (!p.trainable()) continue;
    const FlatPiece mine = piece_of(p, shard_, shard_.rank);
    for (int64_t i = int64_t(p.offset); i < int64_t(p.offset) + p.numel; i += kNormChunk) {
      const int64_t b = std::max(i, mine.begin);
      const int64_t e = std::min(i + kNormChunk, mine.end);
      if (b < e) norm_chunks_.push_back({b - shard_.begin(), e - b});
    }
    if (p.group == OptimGroup::AdamW && mine.size() > 0) {
      adamw_segments_.push_back({mine.begin - shard_.begin(), mine.size()});
      adamw_decays_.push_back(decays(p));
    }
  }
  // The largest Muon matrix and Gram matrix: what one Newton–Schulz workspace holds (the memory
  // plan's, train/train_memory.cpp).
  int64_t largest_muon = 1, largest_gram = 1;
  for (const ParamSpec& p : specs_)
    if (p.group == OptimGroup::Muon) {
      largest_muon = std::max(largest_muon, p.numel);
      largest_gram = std::max(largest_gram, std::min(p.shape[0], p.shape[1]));
    }
  for (const MuonPlan::Matrix& m : muon_.matrices) {
    const FlatPiece mine = piece_of(specs_[m.spec], shard_, shard_.rank);
    muon_segments_.push_back({mine.begin - shard_.begin(), mine.size()});
    muon_spec_.push_back(m.spec);
    if (m.owner != shard_.rank) continue;
    const ParamSpec& p = specs_[m.spec];
    // Batches of one shape, each holding at most as many matrices as fit the workspace of the
    // largest one (a backend that orthogonalises a batch at once, the GPU's, keeps it whole).
    const int64_t size = p.shape[0] * p.shape[1], m2 = std::min(p.shape[0], p.shape[1]);
    const size_t most = size_t(std::max<int64_t>(
        1, std::min(largest_muon / size, largest_gram * largest_gram / (m2 * m2))));
    auto open = [&](const NsBatch& b) {
      return b.rows == p.shape[0] && b.cols == p.shape[1] && b.matrices.size() < most;
    };
    auto it = std::find_if(ns_batches_.begin(), ns_batches_.end(), open);
    if (it == ns_batches_.end())
      it = ns_batches_.insert(ns_batches_.end(), {p.shape[0], p.shape[1], {}});
    it->matrices.push_back(owned_ + m.owned_offset);
  }
}

std::vector<Optimizer::NsCall> Optimizer::newton_schulz_calls() const {
  std::vector<NsCall> calls;
  for (const NsBatch& b : ns_batches_)
    calls.push_back({b.rows, b.cols, int64_t(b.matrices.size())});
  return calls;
}

float Optimizer::step(ParamStore& store, double lr) {
  ZAYA_CHECK(store.size() == total_, "Optimizer::step: the store holds ", store.size(),
             " floats, the optimizer was built for ", total_);
  ZAYA_CHECK(shard_.world == 1, "Optimizer::step(ParamStore&) is for one process; with ",
             shard_.world, " ranks pass the reduce-scattered shard gradients");
  ZAYA_CHECK(be_->host_memory(), "Optimizer::step(ParamStore&) is for host memory; on the '",
             be_->name(), "' backend pass the weights and gradients in its memory");
  return step(store.weights(), store.grads(), lr);
}

double Optimizer::grad_norm(const float* shard_grads) const {
  double total =
      be_->sum_of_squares_chunks(shard_grads, norm_chunks_.data(), int(norm_chunks_.size()));
  dist::sum_over_ranks(comm_, std::span<double>(&total, 1));
  return std::sqrt(total);
}

float Optimizer::step(float* weights, float* shard_grads, double lr) {
  return step_shard(weights + shard_.begin(), shard_grads, lr);
}

float Optimizer::step_shard(float* shard_weights, float* shard_grads, double lr) {
  const double norm = grad_norm(shard_grads);
  if (!std::isfinite(norm)) return float(norm);
  if (config_.grad_clip > 0 && norm > config_.grad_clip) {
    // Every trainable piece: the norm's chunks cover exactly those.
    be_->scale_segments(shard_grads, norm_chunks_.data(), int(norm_chunks_.size()),
                        float(config_.grad_clip / norm));
  }
  ++step_count_;
  if (!adamw_segments_.empty()) {
    const double t = double(step_count_);
    AdamwConstants c;
    c.beta1 = float(config_.adam_beta1);
    c.one_minus_beta1 = float(1 - config_.adam_beta1);
    c.beta2 = float(config_.adam_beta2);
    c.one_minus_beta2 = float(1 - config_.adam_beta2);
    c.step_size = float(lr / (1.0 - std::pow(config_.adam_beta1, t)));
    c.inv_sqrt_bc2 = float(1.0 / std::sqrt(1.0 - std::pow(config_.adam_beta2, t)));
    c.eps = float(config_.adam_eps);
    const float keep = float(1.0 - lr * config_.weight_decay);
    for (size_t i = 0; i < adamw_segments_.size(); ++i)
      adamw_segments_[i].keep = adamw_decays_[i] ? keep : 1.0f;
    be_->adamw_update(shard_weights, shard_grads, m_, v_, adamw_segments_.data(),
                      int(adamw_segments_.size()), c);
  }
  muon_step(shard_weights, shard_grads, lr);
  return float(norm);
}

void Optimizer::muon_step(float* shard_weights, const float* shard_grads, double lr) {
  if (muon_.matrices.empty()) return;
  const int count = int(muon_segments_.size());
  be_->muon_momentum(m_, direction_, shard_grads, muon_segments_.data(), count,
                     float(config_.muon_momentum), float(1 - config_.muon_momentum),
                     config_.muon_nesterov);
  exchange_pieces(/*to_owners=*/true);
  for (const NsBatch& b : ns_batches_)
    be_->newton_schulz_batch(b.matrices.data(), int(b.matrices.size()), b.rows, b.cols,
                             int(config_.muon_ns_steps));
  exchange_pieces(/*to_owners=*/false);
  const float keep = float(1.0 - lr * config_.weight_decay);
  for (size_t i = 0; i < muon_segments_.size(); ++i) {
    const ParamSpec& p = specs_[muon_spec_[i]];
    muon_segments_[i].keep = keep;
    muon_segments_[i].step = float(lr * 0.2 * std::sqrt(double(std::max(p.shape[0], p.shape[1]))));
  }
  be_->decay_and_step(shard_weights, direction_, muon_segments_.data(), count);
}

// Moves pieces between the holders' direction_ and the owners' owned_ buffers. Every rank walks
// the matrices in registry order and an owner takes its holders in rank order, so each blocking
// send meets its receive: the first matrix in that order whose exchange has not finished has
// every participant at it.
void Optimizer::exchange_pieces(bool to_owners) {
  // The pieces are in the backend's memory: exchange_ moves that memory.
  auto send = [&](const float* p, size_t n, int peer, int tag) {
    exchange_->send(p, n, DType::F32, peer, tag);
  };
  auto recv = [&](float* p, size_t n, int peer, int tag) {
    exchange_->recv(p, n, DType::F32, peer, tag);
  };
  for (const MuonPlan::Matrix& m : muon_.matrices) {
    const ParamSpec& p = specs_[m.spec];
    const int first = shard_.owner_of(int64_t(p.offset));
    const int last = shard_.owner_of(int64_t(p.offset) + p.numel - 1);
    const FlatPiece mine = piece_of(p, shard_, shard_.rank);
    float* local = direction_ + (mine.begin - shard_.begin());
    if (m.owner != shard_.rank) {
      if (mine.size() == 0) continue;
      const size_t n = size_t(mine.size());
      if (to_owners)
        send(local, n, m.owner, kTagPiece);
      else
        recv(local, n, m.owner, kTagResult);
      continue;
    }
    float* whole = owned_ + m.owned_offset;
    for (int r = first; r <= last; ++r) {
      const FlatPiece pc = piece_of(p, shard_, r);
      float* at = whole + (pc.begin - int64_t(p.offset));
      const size_t n = size_t(pc.size());
      if (r == shard_.rank) {
        if (to_owners)
          be_->copy(at, local, sizeof(float) * n);
        else
          be_->copy(local, at, sizeof(float) * n);
      } else if (to_owners) {
        recv(at, n, r, kTagPiece);
      } else {
        send(at, n, r, kTagResult);
      }
    }
  }
}

std::map<std::string, Tensor> Optimizer::state_tensors() const {
  if (be_->host_memory()) return {{"exp_avg", exp_avg_}, {"exp_avg_sq", exp_avg_sq_}};
  const size_t bytes = sizeof(float) * size_t(shard_.size());
  Tensor m({shard_.size()}, DType::F32), v({shard_.size()}, DType::F32);
  be_->to_host(m.data<float>(), m_, bytes);
  be_->to_host(v.data<float>(), v_, bytes);
  return {{"exp_avg", m}, {"exp_avg_sq", v}};
}

void Optimizer::set_state(const std::map<std::string, Tensor>& shard_state) {
  ZAYA_CHECK(
      shard_state.size() == 2 && shard_state.count("exp_avg") && shard_state.count("exp_avg_sq"),
      "Optimizer::set_state: expected exactly 'exp_avg' and 'exp_avg_sq'");
  const size_t bytes = sizeof(float) * size_t(shard_.size());
  for (const auto& [name, t] : shard_state) {
    ZAYA_CHECK(t.dtype() == DType::F32 && t.numel() == shard_.size(), "Optimizer::set_state: '",
               name, "' must be F32 with ", shard_.size(), " elements, got ", dtype_name(t.dtype()),
               " ", shape_str(t.shape()));
    float* live = name == "exp_avg" ? m_ : v_;
    if (be_->host_memory()) {
      if (t.data<float>() != live) std::memcpy(live, t.data<float>(), bytes);
    } else {
      be_->to_device(live, t.data<float>(), bytes);
    }
  }
}

void Optimizer::load_state(const std::map<std::string, Tensor>& state, int64_t step_count) {
  ZAYA_CHECK(step_count >= 0, "Optimizer::load_state: step count must be >= 0, got ", step_count);
  ZAYA_CHECK(state.size() == 2,
             "Optimizer::load_state: expected exactly 'exp_avg' and "
             "'exp_avg_sq', got ",
             state.size(), " tensors");
  std::map<std::string, Tensor> shard_state;
  for (const char* name : {"exp_avg", "exp_avg_sq"}) {
    const auto it = state.find(name);
    ZAYA_CHECK(it != state.end(), "Optimizer::load_state: missing state tensor '", name, "'");
    const Tensor& src = it->second;
    ZAYA_CHECK(src.dtype() == DType::F32 && src.numel() == int64_t(total_),
               "Optimizer::load_state: '", name, "' must be F32 with ", total_, " elements, got ",
               dtype_name(src.dtype()), " ", shape_str(src.shape()));
    Tensor range({shard_.size()}, DType::F32);
    std::memcpy(range.data<float>(), src.data<float>() + shard_.begin(),
                size_t(shard_.size()) * sizeof(float));
    shard_state[name] = range;
  }
  set_state(shard_state);
  step_count_ = step_count;
}

void Optimizer::set_step_count(int64_t step_count) {
  ZAYA_CHECK(step_count >= 0, "Optimizer::set_step_count: step count must be >= 0, got ",
             step_count);
  step_count_ = step_count;
}

}  // namespace zaya
