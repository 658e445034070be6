#include "dist/mpi_native_communicator.h"

#include <mpi.h>

#include <climits>
#include <cstring>

#include "core/error.h"
#include "dist/mpi_communicator.h"

namespace zaya::dist {

namespace {

MPI_Datatype mpi_type(DType t) {
  ZAYA_CHECK(t == DType::F32 || t == DType::I32, "mpi-native peer: ", dtype_name(t),
             " has no MPI datatype (use float or int32)");
  return t == DType::F32 ? MPI_FLOAT : MPI_INT;
}

MPI_Op mpi_op(ReduceOp op) {
  return op == ReduceOp::Sum ? MPI_SUM : op == ReduceOp::Max ? MPI_MAX : MPI_MIN;
}

int count_of(size_t n, const char* what) {
  ZAYA_CHECK(n <= size_t(INT_MAX), "mpi-native ", what, ": ", n,
             " elements exceed MPI's int count");
  return int(n);
}

}  // namespace

NativeMpiCommunicator::NativeMpiCommunicator()
    : rank_(mpi_world_rank()), world_(mpi_world_size()) {}

void NativeMpiCommunicator::all_reduce(const void* send, void* recv, size_t count, DType dtype,
                                       ReduceOp op) {
  MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, count_of(count, "all_reduce"),
                mpi_type(dtype), mpi_op(op), MPI_COMM_WORLD);
}

void NativeMpiCommunicator::reduce_scatter(const void* send, void* recv, size_t recv_count,
                                           DType dtype, ReduceOp op) {
  const size_t esize = dtype_size(dtype);
  const bool in_place =
      static_cast<const unsigned char*>(send) + size_t(rank_) * recv_count * esize == recv;
  if (in_place) {
    // MPI's in-place form reads the whole buffer and leaves the result at its start; NCCL's (the
    // Communicator's) leaves it in the rank's slot, so move it there.
    void* buf = const_cast<void*>(send);
    MPI_Reduce_scatter_block(MPI_IN_PLACE, buf, count_of(recv_count, "reduce_scatter"),
                             mpi_type(dtype), mpi_op(op), MPI_COMM_WORLD);
    if (rank_ != 0) std::memmove(recv, buf, recv_count * esize);
    return;
  }
  MPI_Reduce_scatter_block(send, recv, count_of(recv_count, "reduce_scatter"), mpi_type(dtype),
                           mpi_op(op), MPI_COMM_WORLD);
}

void NativeMpiCommunicator::all_gather(const void* send, void* recv, size_t send_count,
                                       DType dtype) {
  const size_t esize = dtype_size(dtype);
  const bool in_place =
      static_cast<const unsigned char*>(recv) + size_t(rank_) * send_count * esize == send;
  const int n = count_of(send_count, "all_gather");
  MPI_Allgather(in_place ? MPI_IN_PLACE : send, n, mpi_type(dtype), recv, n, mpi_type(dtype),
                MPI_COMM_WORLD);
}

void NativeMpiCommunicator::broadcast(const void* send, void* recv, size_t count, DType dtype,
                                      int root) {
  if (rank_ == root && send != recv) std::memcpy(recv, send, count * dtype_size(dtype));
  MPI_Bcast(recv, count_of(count, "broadcast"), mpi_type(dtype), root, MPI_COMM_WORLD);
}

void NativeMpiCommunicator::send(const void* buf, size_t count, DType dtype, int peer, int tag) {
  MPI_Send(buf, count_of(count, "send"), mpi_type(dtype), peer, tag, MPI_COMM_WORLD);
}

void NativeMpiCommunicator::recv(void* buf, size_t count, DType dtype, int peer, int tag) {
  MPI_Recv(buf, count_of(count, "recv"), mpi_type(dtype), peer, tag, MPI_COMM_WORLD,
           MPI_STATUS_IGNORE);
}

void NativeMpiCommunicator::barrier() {
  MPI_Barrier(MPI_COMM_WORLD);
}

std::unique_ptr<Transfer> NativeMpiCommunicator::start_sendrecv(const void*, size_t, int, void*,
                                                                size_t, int, DType, int) {
  ZAYA_FAIL("the mpi-native benchmark peer has no start_sendrecv: use MpiCommunicator");
}

std::unique_ptr<Communicator> NativeMpiCommunicator::split(int, int) {
  ZAYA_FAIL("the mpi-native benchmark peer has no split: use MpiCommunicator");
}

}  // namespace zaya::dist
