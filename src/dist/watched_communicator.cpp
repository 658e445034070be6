#include "dist/watched_communicator.h"

#include <numeric>
#include <utility>

namespace zaya::dist {

namespace {

// A transfer in flight whose wait() is watched under the sequence number of its start.
class WatchedTransfer final : public Transfer {
 public:
  WatchedTransfer(std::unique_ptr<Transfer> inner, std::function<CollectiveWatchdog::Wait()> watch)
      : inner_(std::move(inner)), watch_(std::move(watch)) {}
  void wait() override {
    const CollectiveWatchdog::Wait w = watch_();
    inner_->wait();
  }
  bool test() override { return inner_->test(); }

 private:
  std::unique_ptr<Transfer> inner_;
  std::function<CollectiveWatchdog::Wait()> watch_;
};

std::vector<int> every_rank(int world) {
  std::vector<int> r(size_t(world), 0);
  std::iota(r.begin(), r.end(), 0);
  return r;
}

}  // namespace

WatchedCommunicator::WatchedCommunicator(std::unique_ptr<Communicator> inner,
                                         CollectiveWatchdog& watchdog, std::string group)
    : WatchedCommunicator(std::move(inner), watchdog, std::move(group), {}) {
  members_ = every_rank(world_size());
}

WatchedCommunicator::WatchedCommunicator(std::unique_ptr<Communicator> inner,
                                         CollectiveWatchdog& watchdog, std::string group,
                                         std::vector<int> members)
    : inner_(std::move(inner)),
      watchdog_(watchdog),
      group_(std::move(group)),
      members_(std::move(members)) {}

CollectiveWatchdog::Wait WatchedCommunicator::watch_p2p(const char* kind, int64_t bytes,
                                                        int64_t seq,
                                                        std::initializer_list<int> peers) const {
  std::vector<int> global;
  for (const int p : peers)
    if (p >= 0 && size_t(p) < members_.size()) global.push_back(members_[size_t(p)]);
  return watchdog_.begin(group_, members_, seq, kind, bytes, std::move(global));
}

void WatchedCommunicator::all_reduce(const void* send, void* recv, size_t count, DType dtype,
                                     ReduceOp op) {
  const auto w = watch("all_reduce", payload_bytes(count, dtype));
  inner_->all_reduce(send, recv, count, dtype, op);
}

void WatchedCommunicator::reduce_scatter(const void* send, void* recv, size_t recv_count,
                                         DType dtype, ReduceOp op) {
  const auto w = watch("reduce_scatter", payload_bytes(recv_count * size_t(world_size()), dtype));
  inner_->reduce_scatter(send, recv, recv_count, dtype, op);
}

void WatchedCommunicator::all_gather(const void* send, void* recv, size_t send_count, DType dtype) {
  const auto w = watch("all_gather", payload_bytes(send_count * size_t(world_size()), dtype));
  inner_->all_gather(send, recv, send_count, dtype);
}

void WatchedCommunicator::broadcast(const void* send, void* recv, size_t count, DType dtype,
                                    int root) {
  const auto w = watch("broadcast", payload_bytes(count, dtype));
  inner_->broadcast(send, recv, count, dtype, root);
}

void WatchedCommunicator::send(const void* buf, size_t count, DType dtype, int peer, int tag) {
  const auto w = watch_p2p("send", payload_bytes(count, dtype), ++p2p_, {peer});
  inner_->send(buf, count, dtype, peer, tag);
}

void WatchedCommunicator::recv(void* buf, size_t count, DType dtype, int peer, int tag) {
  const auto w = watch_p2p("recv", payload_bytes(count, dtype), ++p2p_, {peer});
  inner_->recv(buf, count, dtype, peer, tag);
}

void WatchedCommunicator::barrier() {
  const auto w = watch("barrier", 0);
  inner_->barrier();
}

std::unique_ptr<Transfer> WatchedCommunicator::start_sendrecv(const void* send, size_t send_count,
                                                              int dest, void* recv,
                                                              size_t recv_count, int src,
                                                              DType dtype, int tag) {
  const int64_t bytes = payload_bytes(send_count + recv_count, dtype), seq = ++p2p_;
  return std::make_unique<WatchedTransfer>(
      inner_->start_sendrecv(send, send_count, dest, recv, recv_count, src, dtype, tag),
      [this, bytes, seq, dest, src] {
        return watch_p2p("sendrecv", bytes, seq, {dest, src});
      });
}

std::unique_ptr<Transfer> WatchedCommunicator::start_reduce_scatter(const void* send, void* recv,
                                                                    size_t recv_count, DType dtype,
                                                                    ReduceOp op) {
  const int64_t bytes = payload_bytes(recv_count * size_t(world_size()), dtype),
                seq = ++collectives_;
  return std::make_unique<WatchedTransfer>(
      inner_->start_reduce_scatter(send, recv, recv_count, dtype, op), [this, bytes, seq] {
        return watchdog_.begin(group_, members_, seq, "reduce_scatter", bytes);
      });
}

std::unique_ptr<Transfer> WatchedCommunicator::start_reduce(const void* send, void* recv,
                                                            size_t count, DType dtype, ReduceOp op,
                                                            int root) {
  const int64_t bytes = payload_bytes(count, dtype), seq = ++collectives_;
  return std::make_unique<WatchedTransfer>(
      inner_->start_reduce(send, recv, count, dtype, op, root),
      [this, bytes, seq] { return watchdog_.begin(group_, members_, seq, "reduce", bytes); });
}

std::unique_ptr<Communicator> WatchedCommunicator::split(int color, int key) {
  std::unique_ptr<Communicator> sub;
  {
    const auto w = watch("split", 0);
    sub = inner_->split(color, key);
  }
  // The sub-group's members as global ranks: this rank's global rank from every member.
  const int global = members_[size_t(rank())];
  std::vector<int> members(size_t(sub->world_size()), -1);
  auto watched = std::make_unique<WatchedCommunicator>(
      std::move(sub), watchdog_, group_ + "/split(" + std::to_string(color) + ")", members);
  watched->all_gather(&global, watched->members_.data(), 1, DType::I32);
  return watched;
}

}  // namespace zaya::dist
