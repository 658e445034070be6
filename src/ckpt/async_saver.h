// ShardedCheckpoint: asynchronous, parallel checkpoint saving for the trainer.
//
// save() is collective (every rank calls it at the same step): rank 0 prepares ROOT/step-N.tmp/,
// every rank snapshots its own ZeRO-1 range into memory (the only part that blocks training)
// and writes its rank file on a background thread, so all ranks write at once while training
// goes on. The save completes at a later collective point: poll() (called once per step) finds
// out, with one tiny all-gather, whether every rank's file is written; once they are, the ranks'
// file entries (bytes, checksum) are gathered and rank 0 writes the manifest and the COMPLETE
// marker and renames the directory into place, then applies retention. At most one save is in
// flight: save() and wait() first finish the previous one. A failed write on any rank fails the
// save on every rank (rethrown by poll/wait), so it is never silent and no rank goes on alone.
// The ranks must share the checkpoint file system (one machine, or a cluster file system).
#pragma once

#include <atomic>
#include <exception>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"

namespace zaya {

namespace dist {
class Communicator;
}

class ShardedCheckpoint {
 public:
  // comm == nullptr: one process.
  ShardedCheckpoint(std::string root, int keep_last, int64_t keep_every,
                    dist::Communicator* comm = nullptr);
  ~ShardedCheckpoint();  // joins the writer; a save not yet committed stays a .tmp directory
  ShardedCheckpoint(const ShardedCheckpoint&) = delete;
  ShardedCheckpoint& operator=(const ShardedCheckpoint&) = delete;

  void save(const ParamStore& params, const Optimizer& optimizer, const RouterBalancer& balancer,
            const TrainerState& state);
  // Collective: commits the in-flight save if every rank has written its file. Cheap otherwise.
  void poll();
  // Collective: waits for the in-flight save and commits it.
  void wait();
  const std::string& root() const { return root_; }
  const std::string& last_saved() const { return last_saved_; }  // the newest committed save

  // Called on rank 0 after every rank file is written and before the commit (fault drills).
  void set_before_commit(std::function<void(int64_t step)> hook) {
    before_commit_ = std::move(hook);
  }

 private:
  void finish();  // joins the writer, gathers the entries, rank 0 commits
  std::string root_;
  int keep_last_;
  int64_t keep_every_;
  dist::Communicator* comm_;
  std::thread writer_;
  std::atomic<bool> written_{false};
  std::exception_ptr error_;
  std::shared_ptr<CheckpointSnapshot> snap_;
  nlohmann::json entry_;
  std::string last_saved_;
  std::function<void(int64_t)> before_commit_;
};

// Stage 3 of a parallel save (see checkpoint.h), collective: gathers every rank's file entry (from
// write_rank_file), or its failure (`error` non-empty), and on rank 0 calls before_commit and
// commits the checkpoint. Throws on every rank when any rank failed. Returns the final directory.
std::string gather_and_commit(dist::Communicator* comm, const std::string& root,
                              const CheckpointSnapshot& snap, const nlohmann::json& entry,
                              const std::string& error,
                              const std::function<void(int64_t)>& before_commit = {});

}  // namespace zaya
