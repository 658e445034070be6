#include "optim/parameter_update.h"

#include <chrono>
#include <cstdio>

#include "core/clock.h"
#include "core/error.h"
#include "dist/communicator.h"

namespace zaya {

ParameterUpdate::ParameterUpdate(ParameterPlacement& placement, const OptimConfig& config,
                                 dist::Communicator* comm, dist::Communicator* data_comm,
                                 int64_t bucket_floats, int zero_stage)
    : placement_(placement),
      be_(placement.backend()),
      optimizer_(placement.params().registry(), config, comm, &placement.backend(), data_comm) {
  const int64_t n = int64_t(placement_.params().size());
  if (placement_.bf16_weight_storage()) {  // the optimizer steps the master of its range
    master_ = MasterWeights(be_, placement_.params(), size_t(optimizer_.shard().begin()),
                            size_t(optimizer_.shard().end()));
    bf16_codec_ = std::make_unique<Bf16WeightCodec>(placement_);
    codec_ = bf16_codec_->functions();
  }
  ZAYA_CHECK(zero_stage == 1 || zero_stage == 2, "ParameterUpdate: ZeRO stage 1 or 2, got ",
             zero_stage);
  const int world = comm ? comm->world_size() : 1;
  if (world > 1) {
    dist::Communicator& moves = data_comm ? *data_comm : *comm;
    // ZeRO-2 keeps the gradients on demand: set before anything else is allocated (the trainer
    // does, before the placement's first buffers), so that they are never whole beside the rest.
    if (zero_stage == 2) placement_.set_gradients_on_demand(true);
    zero1_ = std::make_unique<Zero1Sync>(moves, n, bucket_floats, &be_, zero_stage == 2);
    shard_grads_ = BackendBuffer(be_, sizeof(float) * size_t(zero1_->layout().size()));
    if (zero_stage == 2)
      zero2_ =
          std::make_unique<Zero2Reduce>(moves, n, bucket_floats, &be_, placement_.bf16_gradients());
  } else if (placement_.bf16_gradients()) {  // one rank: every gradient, widened to fp32
    shard_grads_ = BackendBuffer(be_, sizeof(float) * size_t(n));
  }
  // bf16 gradients (the Muon matrices'): read through the placement into ZeRO-1's staging.
  grad_source_ = [this](int64_t offset, int64_t count, float* dst) {
    placement_.load_grads(size_t(offset), size_t(count), dst);
  };
}

void ParameterUpdate::push_weights(size_t offset, size_t n) {
  placement_.push_weights(offset, n);
  if (placement_.bf16_weight_storage()) master_.load(placement_.params(), offset, n);
}

void ParameterUpdate::load_master_weights() {
  if (placement_.bf16_weight_storage())
    master_.load(placement_.params(), 0, placement_.params().size());
}

void ParameterUpdate::pull_weights() {
  placement_.pull_weights();
  if (placement_.bf16_weight_storage()) master_.save(placement_.params());
}

std::function<void(int64_t)> ParameterUpdate::begin_overlapped_reduce() {
  ZAYA_CHECK(zero1_, "ParameterUpdate::begin_overlapped_reduce: one rank has nothing to reduce");
  if (placement_.bf16_gradients())
    zero1_->begin_reduce(grad_source_, shard_grads_.floats());
  else
    zero1_->begin_reduce(placement_.backend_grads(), shard_grads_.floats());
  overlapped_ = true;
  return [this](int64_t from) { zero1_->grads_final_from(from); };
}

std::function<void(int64_t)> ParameterUpdate::begin_backward_reduce(bool first_of_step) {
  ZAYA_CHECK(zero2_, "ParameterUpdate::begin_backward_reduce: not a ZeRO-2 update");
  // The buckets are given back from the end of the buffer down, each right below the last. Only
  // whole granules go back, so each release reaches a granule's worth into the one before: the
  // granule the two share (done with both) goes back with the lower bucket.
  released_from_ = zero2_->layout().total;
  auto release = [this](int64_t offset, int64_t n) {
    const int64_t reach = int64_t(be_.memory_granule() / sizeof(uint16_t));
    const int64_t end =
        std::min(zero2_->layout().total, std::max(offset + n, released_from_ + reach));
    placement_.decommit_grads(size_t(offset), size_t(end - offset));
    released_from_ = offset;
  };
  if (placement_.bf16_gradients())
    zero2_->begin(grad_source_, shard_grads_.floats(), !first_of_step, release);
  else
    zero2_->begin(placement_.backend_grads(), shard_grads_.floats(), !first_of_step, release);
  return [this](int64_t from) { zero2_->grads_final_from(from); };
}

double ParameterUpdate::finish_backward_reduce() {
  const auto t0 = std::chrono::steady_clock::now();
  zero2_->finish();
  return seconds_since(t0);
}

void ParameterUpdate::fill_gradients(float value) {
  if (zero2_)
    be_.fill(shard_grads_.floats(), shard_grads_.bytes() / sizeof(float), value);
  else
    placement_.fill_grads(value);
}

double ParameterUpdate::reduce_gradients() {
  if (!zero1_ || zero2_) return 0;
  const auto t0 = std::chrono::steady_clock::now();
  if (overlapped_)
    zero1_->finish_reduce();
  else if (placement_.bf16_gradients())
    zero1_->reduce_scatter_grads(grad_source_, shard_grads_.floats());
  else
    zero1_->reduce_scatter_grads(placement_.backend_grads(), shard_grads_.floats());
  overlapped_ = false;
  return seconds_since(t0);
}

double ParameterUpdate::step(double lr) {
  const size_t n = placement_.params().size();
  if (placement_.bf16_weight_storage()) {
    // The optimizer updates the master weights of this rank's range; the new values are stored
    // (rounded to bf16 where the products read them) on every rank.
    float* const master = master_.values();
    float* step_grads = zero1_ ? shard_grads_.floats() : nullptr;
    if (!zero1_) {
      if (placement_.bf16_gradients()) {  // one rank: its range is every gradient
        placement_.load_grads(0, n, shard_grads_.floats());
        step_grads = shard_grads_.floats();
      } else {
        step_grads = placement_.backend_grads();
      }
    }
    const double grad_norm = optimizer_.step_shard(master, step_grads, lr);
    if (zero1_)
      zero1_->all_gather_weights(master, codec_);
    else
      placement_.store_weights(0, n, master);
    return grad_norm;
  }
  float* const weights = placement_.backend_weights();
  if (!zero1_) return optimizer_.step(weights, placement_.backend_grads(), lr);
  const double grad_norm = optimizer_.step(weights, shard_grads_.floats(), lr);
  zero1_->all_gather_weights(weights);
  return grad_norm;
}

void ParameterUpdate::gather_master_weights_to_host() {
  if (!placement_.bf16_weight_storage() || !zero1_) return;
  float* host = placement_.params().weights();
  zero1_->all_gather_weights(master_.values(),
                             [&](int64_t offset, const float* values, int64_t count) {
                               be_.to_host(host + offset, values, sizeof(float) * size_t(count));
                             });
}

int64_t ParameterUpdate::bytes_per_step() {
  if (!zero1_) return 0;
  return placement_.bf16_weight_storage() ? zero1_->bytes_per_step(codec_)
                                          : zero1_->bytes_per_step();
}

std::string ParameterUpdate::zero1_summary(bool overlap_reduce) {
  if (!zero1_) return "";
  char line[320];
  if (zero2_) {
    std::snprintf(line, sizeof line,
                  "ZeRO-2: %lld floats per rank shard, gradients sharded (each backward's moved "
                  "to their owners %s, in %lld buckets, and their memory given back); each rank "
                  "sends %.1f MiB per backward and %.1f MiB in the all-gather per step, and "
                  "%.1f KiB in the Muon exchange (split and rebalanced matrices)",
                  (long long)zero1_->layout().chunk(),
                  overlap_reduce ? "while it runs" : "after it", (long long)zero2_->bucket_count(),
                  double(zero2_->bytes_per_reduce()) / 1048576.0,
                  double(bytes_per_step() - zero1_->bytes_per_step() / 2) / 1048576.0,
                  double(optimizer().muon_exchange_bytes()) / 1024.0);
    return line;
  }
  std::snprintf(line, sizeof line,
                "ZeRO-1: %lld floats per rank shard; per step each rank sends %.1f MiB in "
                "reduce-scatter + all-gather (%lld buckets, the reduce-scatter %s) and %.1f KiB "
                "in the Muon exchange (split and rebalanced matrices)",
                (long long)zero1_->layout().chunk(), double(bytes_per_step()) / 1048576.0,
                (long long)zero1_->bucket_count(),
                overlap_reduce ? "overlapping the backward" : "after the backward",
                double(optimizer().muon_exchange_bytes()) / 1024.0);
  return line;
}

}  // namespace zaya
