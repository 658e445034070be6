// The one-process communicator: world size 1, collectives are copies. Point-to-point to self is
// buffered, so code written for N ranks runs unchanged on one.
#pragma once

#include <deque>
#include <map>
#include <vector>

#include "dist/communicator.h"

namespace zaya::dist {

class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string kind() const override { return "local"; }

  void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) override;
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype,
                      ReduceOp op) override;
  void all_gather(const void* send, void* recv, size_t send_count, DType dtype) override;
  void broadcast(const void* send, void* recv, size_t count, DType dtype, int root) override;
  void send(const void* buf, size_t count, DType dtype, int peer, int tag) override;
  void recv(void* buf, size_t count, DType dtype, int peer, int tag) override;
  void barrier() override {}
  // To self (peer 0) through the mailbox: the send is posted before the receive is taken.
  std::unique_ptr<Transfer> start_sendrecv(const void* send, size_t send_count, int dest,
                                           void* recv, size_t recv_count, int src, DType dtype,
                                           int tag) override;
  std::unique_ptr<Communicator> split(int color, int key) override;

 private:
  std::map<int, std::deque<std::vector<unsigned char>>> mailbox_;  // by tag, FIFO
};

}  // namespace zaya::dist
