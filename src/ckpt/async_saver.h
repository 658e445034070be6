// ShardedCheckpoint: asynchronous checkpoint saving for the trainer. save() snapshots the live
// state into memory (the only part that blocks training) and writes it on a background thread;
// at most one save is in flight, so save() first waits for the previous one. wait() joins the
// writer and rethrows its error, so a failed save is never silent.
#pragma once

#include <exception>
#include <string>
#include <thread>

#include "ckpt/checkpoint.h"

namespace zaya {

class ShardedCheckpoint {
 public:
  ShardedCheckpoint(std::string root, int keep_last, int64_t keep_every, int world_size = 1);
  ~ShardedCheckpoint();  // waits; errors are reported on stderr because destructors cannot throw
  ShardedCheckpoint(const ShardedCheckpoint&) = delete;
  ShardedCheckpoint& operator=(const ShardedCheckpoint&) = delete;

  void save(const ParamStore& params, const Optimizer& optimizer, const RouterBalancer& balancer,
            const TrainerState& state);
  void wait();
  const std::string& root() const { return root_; }
  const std::string& last_saved() const { return last_saved_; }  // after wait()

 private:
  std::string root_;
  int keep_last_, world_size_;
  int64_t keep_every_;
  std::thread writer_;
  std::exception_ptr error_;
  std::string last_saved_, in_flight_;
};

}  // namespace zaya
