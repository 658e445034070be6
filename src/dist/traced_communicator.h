// A communicator that records every collective it carries as a trace span (core/trace.h): its
// kind, its bytes and how long this rank spent in it, so that a trace shows which rank waited in
// which collective. It forwards every call to the communicator it wraps, unchanged; the
// sub-communicators of split() are traced too. `zaya train --trace` wraps its communicators in it.
#pragma once

#include <memory>
#include <string>

#include "dist/communicator.h"

namespace zaya::dist {

class TracedCommunicator final : public Communicator {
 public:
  // `name` labels the spans ("world", "data", "nccl").
  TracedCommunicator(std::unique_ptr<Communicator> inner, std::string name);
  // Wraps a communicator owned elsewhere, which must outlive this one.
  TracedCommunicator(Communicator& inner, std::string name);

  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  std::string kind() const override { return inner_.kind(); }
  bool device_memory() const override { return inner_.device_memory(); }

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
  std::string span(const char* op) const { return name_ + " " + op; }
  std::unique_ptr<Communicator> owned_;
  Communicator& inner_;
  std::string name_;
};

}  // namespace zaya::dist
