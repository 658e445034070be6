// The benchmark peer of `zaya bench comm --peer`: a Communicator that calls MPI's own collectives
// (MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Allgather, MPI_Bcast) with MPI's datatypes and
// reduction operators, i.e. whatever algorithm Open MPI picks for the size. Its sums are not in
// a fixed rank order, so training never uses it; it exists to show what zaya's deterministic
// MpiCommunicator costs against the library it runs on, in the same run. Float and int32 only
// (MPI has no bfloat16 type). Compiled only with MPI (ZAYA_HAVE_MPI).
#pragma once

#include "dist/communicator.h"

namespace zaya::dist {

class NativeMpiCommunicator final : public Communicator {
 public:
  NativeMpiCommunicator();
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string kind() const override { return "mpi-native"; }

  void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) override;
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype,
                      ReduceOp op) override;
  void all_gather(const void* send, void* recv, size_t send_count, DType dtype) override;
  void broadcast(const void* send, void* recv, size_t count, DType dtype, int root) override;
  void send(const void* buf, size_t count, DType dtype, int peer, int tag) override;
  void recv(void* buf, size_t count, DType dtype, int peer, int tag) override;
  void barrier() override;
  // The peer measures collectives only: these two refuse (training never uses this class).
  std::unique_ptr<Transfer> start_sendrecv(const void*, size_t, int, void*, size_t, int, DType,
                                           int) override;
  std::unique_ptr<Communicator> split(int, int) override;

 private:
  int rank_ = 0;
  int world_ = 1;
};

}  // namespace zaya::dist
