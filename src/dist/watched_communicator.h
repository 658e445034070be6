// A communicator whose every collective is watched (dist/collective_watchdog.h): each call takes
// the group's next sequence number and registers its wait with the watchdog, so that a rank stuck
// in it past the timeout reports which collective, of which group, since when. It forwards every
// call to the communicator it wraps, unchanged; the sub-communicators of split() are watched too
// (their members' global ranks gathered once, at the split). `zaya train` wraps its world in it
// when it runs on several ranks.
#pragma once

#include <atomic>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "dist/collective_watchdog.h"
#include "dist/communicator.h"

namespace zaya::dist {

class WatchedCommunicator final : public Communicator {
 public:
  // The world: members 0..world_size-1, named `group` ("world").
  WatchedCommunicator(std::unique_ptr<Communicator> inner, CollectiveWatchdog& watchdog,
                      std::string group);
  // A group whose members (global ranks, in the group's order) are known.
  WatchedCommunicator(std::unique_ptr<Communicator> inner, CollectiveWatchdog& watchdog,
                      std::string group, std::vector<int> members);

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  std::string kind() const override { return inner_->kind(); }
  bool device_memory() const override { return inner_->device_memory(); }
  const std::vector<int>& members() const { return members_; }

  void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) override;
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype,
                      ReduceOp op) override;
  void all_gather(const void* send, void* recv, size_t send_count, DType dtype) override;
  void broadcast(const void* send, void* recv, size_t count, DType dtype, int root) override;
  void send(const void* buf, size_t count, DType dtype, int peer, int tag) override;
  void recv(void* buf, size_t count, DType dtype, int peer, int tag) override;
  void barrier() override;
  std::unique_ptr<Transfer> start_sendrecv(const void* send, size_t send_count, int dest,
                                           void* recv, size_t recv_count, int src, DType dtype,
                                           int tag) override;
  std::unique_ptr<Transfer> start_reduce_scatter(const void* send, void* recv, size_t recv_count,
                                                 DType dtype, ReduceOp op) override;
  std::unique_ptr<Transfer> start_reduce(const void* send, void* recv, size_t count, DType dtype,
                                         ReduceOp op, int root) override;
  std::unique_ptr<Communicator> split(int color, int key) override;

 private:
  CollectiveWatchdog::Wait watch(const char* kind, int64_t bytes) {
    return watchdog_.begin(group_, members_, ++collectives_, kind, bytes);
  }
  // A point-to-point wait with the group ranks of its peers (-1: none).
  CollectiveWatchdog::Wait watch_p2p(const char* kind, int64_t bytes, int64_t seq,
                                     std::initializer_list<int> peers) const;
  std::unique_ptr<Communicator> inner_;
  CollectiveWatchdog& watchdog_;
  std::string group_;
  std::vector<int> members_;
  // Collectives begun on this group (the same count on every member), point-to-point calls begun
  // (each rank its own). Atomic: a checkpoint's writer thread may use the group too.
  std::atomic<int64_t> collectives_{0}, p2p_{0};
};

}  // namespace zaya::dist
