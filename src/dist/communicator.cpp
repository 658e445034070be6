#include "dist/communicator.h"

namespace zaya::dist {

std::unique_ptr<Transfer> Communicator::start_reduce_scatter(const void* send, void* recv,
                                                             size_t recv_count, DType dtype,
                                                             ReduceOp op) {
  reduce_scatter(send, recv, recv_count, dtype, op);
  return std::make_unique<CompletedTransfer>();
}

void sendrecv(Communicator& comm, const void* send, size_t send_count, int dest, void* recv,
              size_t recv_count, int src, DType dtype, int tag) {
  comm.start_sendrecv(send, send_count, dest, recv, recv_count, src, dtype, tag)->wait();
}

}  // namespace zaya::dist
