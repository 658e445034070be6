#include "ckpt/async_saver.h"

#include <cstdio>

#include "core/error.h"

namespace zaya {

ShardedCheckpoint::ShardedCheckpoint(std::string root, int keep_last, int64_t keep_every,
                                     int world_size)
    : root_(std::move(root)),
      keep_last_(keep_last),
      world_size_(world_size),
      keep_every_(keep_every) {}

ShardedCheckpoint::~ShardedCheckpoint() {
  try {
    wait();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "checkpoint save failed: %s\n", e.what());
  }
}

void ShardedCheckpoint::save(const ParamStore& params, const Optimizer& optimizer,
                             const RouterBalancer& balancer, const TrainerState& state) {
  wait();  // one save in flight bounds the memory to one snapshot
  auto snap =
      std::make_shared<CheckpointSnapshot>(take_snapshot(params, optimizer, balancer, state));
  in_flight_ = checkpoint_dir_name(root_, state.step);
  writer_ = std::thread([this, snap] {
    try {
      write_checkpoint(root_, *snap, world_size_);
      apply_retention(root_, keep_last_, keep_every_);
    } catch (...) {
      error_ = std::current_exception();
    }
  });
}

void ShardedCheckpoint::wait() {
  if (!writer_.joinable()) return;
  writer_.join();
  if (error_) {
    auto e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
  last_saved_ = in_flight_;
}

}  // namespace zaya
