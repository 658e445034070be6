#include "ckpt/async_saver.h"

#include <array>
#include <cstdio>
#include <vector>

#include "core/error.h"
#include "data/checksum.h"
#include "dist/communicator.h"
#include "dist/rank_sum.h"

namespace zaya {

namespace {

int rank_of(dist::Communicator* c) {
  return c == nullptr ? 0 : c->rank();
}
int world_of(dist::Communicator* c) {
  return c == nullptr ? 1 : c->world_size();
}

}  // namespace

ShardedCheckpoint::ShardedCheckpoint(std::string root, int keep_last, int64_t keep_every,
                                     dist::Communicator* comm)
    : root_(std::move(root)), keep_last_(keep_last), keep_every_(keep_every), comm_(comm) {}

ShardedCheckpoint::~ShardedCheckpoint() {
  // Not collective: other ranks may be gone. A save that was not committed is left as step-N.tmp,
  // which the loader never picks.
  if (writer_.joinable()) writer_.join();
}

void ShardedCheckpoint::save(const ParamStore& params, const Optimizer& optimizer,
                             const RouterBalancer& balancer, const TrainerState& state) {
  wait();  // one save in flight bounds the memory to one snapshot
  if (rank_of(comm_) == 0) prepare_checkpoint_dir(root_, state.step);
  if (comm_ != nullptr) comm_->barrier();  // the directory exists before any rank writes into it
  snap_ = std::make_shared<CheckpointSnapshot>(take_snapshot(params, optimizer, balancer, state));
  written_ = false;
  error_ = nullptr;
  const std::string tmp = checkpoint_dir_name(root_, state.step) + ".tmp";
  writer_ = std::thread([this, tmp] {
    try {
      entry_ = write_rank_file(tmp, *snap_);
    } catch (...) {
      error_ = std::current_exception();
    }
    written_ = true;
  });
}

void ShardedCheckpoint::poll() {
  if (!snap_) return;
  int64_t done = written_ ? 1 : 0;
  dist::sum_over_ranks(comm_, std::span<int64_t>(&done, 1));
  if (done == world_of(comm_)) finish();
}

void ShardedCheckpoint::wait() {
  if (snap_) finish();
}

void ShardedCheckpoint::finish() {
  writer_.join();
  std::string why;
  if (error_) {
    try {
      std::rethrow_exception(error_);
    } catch (const std::exception& e) {
      why = e.what();
    }
  }
  const auto snap = std::move(snap_);
  snap_.reset();
  last_saved_ = gather_and_commit(comm_, root_, *snap, entry_, why, before_commit_);
  if (rank_of(comm_) == 0) apply_retention(root_, keep_last_, keep_every_, snap->state.step);
}

std::string gather_and_commit(dist::Communicator* comm, const std::string& root,
                              const CheckpointSnapshot& snap, const nlohmann::json& entry,
                              const std::string& error,
                              const std::function<void(int64_t)>& before_commit) {
  const int world = world_of(comm), rank = rank_of(comm);
  // Whether any rank failed, and the first that did: two numbers per rank, whatever the world
  // size (an all-reduced world × 3 table cost every rank O(world), the job O(world²)).
  int32_t first_failed = error.empty() ? world : rank;
  if (comm) comm->all_reduce(&first_failed, &first_failed, 1, DType::I32, dist::ReduceOp::Min);
  if (first_failed < world) {
    if (!error.empty()) ZAYA_FAIL("checkpoint step ", snap.state.step, ": ", error);
    ZAYA_FAIL("checkpoint step ", snap.state.step, ": rank ", first_failed,
              " failed to write its file (its own error names the cause)");
  }
  // Rank 0 alone needs every rank's (bytes, checksum), for the manifest: one message from each.
  const auto mine = [&] {
    return std::array<int64_t, 2>{
        entry["bytes"].get<int64_t>(),
        int64_t(std::stoull(entry["fnv1a64"].get<std::string>(), nullptr, 16))};
  };
  constexpr int kTagFileEntry = 7301;
  if (rank != 0) {
    const std::array<int64_t, 2> e = mine();
    comm->send(e.data(), 4, DType::I32, 0, kTagFileEntry);  // 2 × int64 as 4 × I32 (bytes)
  } else {
    nlohmann::json files = nlohmann::json::array();
    for (int r = 0; r < world; ++r) {
      std::array<int64_t, 2> e{};
      if (r == 0) {
        e = mine();
      } else {
        comm->recv(e.data(), 4, DType::I32, r, kTagFileEntry);
      }
      files.push_back({{"name", checkpoint_rank_file(r)},
                       {"rank", r},
                       {"bytes", e[0]},
                       {"fnv1a64", checksum_hex(uint64_t(e[1]))}});
    }
    if (before_commit) before_commit(snap.state.step);
    commit_checkpoint(root, snap, files);
  }
  return checkpoint_dir_name(root, snap.state.step);
}

}  // namespace zaya
