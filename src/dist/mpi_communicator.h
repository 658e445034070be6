// The MPI communicator (Open MPI from Debian), compiled only when CMake finds MPI (ZAYA_HAVE_MPI).
//
// Determinism: MPI_Allreduce's reduction order is implementation-defined (it may depend on the
// algorithm picked for the message size, or on arrival order), so sums here never use MPI's
// reductions. all_reduce is an all-to-all that hands every rank one chunk of every rank's buffer,
// a local reduction of those contributions in rank order 0..N-1, then an all-gather of the reduced
// chunks; reduce_scatter is the first two steps. The result depends only on the inputs and N.
// MPI moves bytes only (MPI_BYTE), so every DType works the same way.
//
// MPI counts and displacements are int: one call moves at most INT_MAX bytes. Larger collectives
// and messages are split into calls of at most max_call_bytes() each (reduce_scatter and
// all_gather pack each piece's per-rank slices into one contiguous staging block, since their
// displacements would overflow too), with results bitwise equal to the unsplit call's.
//
// Not thread-safe: one thread calls it (MPI is initialised with MPI_THREAD_FUNNELED).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "dist/communicator.h"

namespace zaya::dist {

// Process lifecycle, used by DistContext.
void mpi_init(int* argc, char*** argv);
void mpi_finalize();
[[noreturn]] void mpi_abort(int code);
int mpi_world_rank();
// The largest of every rank's `value` (MPI_Allreduce over MPI_COMM_WORLD; every rank must call it).
int mpi_world_max(int value);
int mpi_world_size();

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator();  // MPI_COMM_WORLD
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string kind() const override { return "mpi"; }

  void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) override;
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype,
                      ReduceOp op) override;
  void all_gather(const void* send, void* recv, size_t send_count, DType dtype) override;
  void broadcast(const void* send, void* recv, size_t count, DType dtype, int root) override;
  void send(const void* buf, size_t count, DType dtype, int peer, int tag) override;
  void recv(void* buf, size_t count, DType dtype, int peer, int tag) override;
  void barrier() override;
  // Non-blocking MPI_Isend/MPI_Irecv (split into pieces of max_call_bytes()).
  std::unique_ptr<Transfer> start_sendrecv(const void* send, size_t send_count, int dest,
                                           void* recv, size_t recv_count, int src, DType dtype,
                                           int tag) override;
  // MPI_Ialltoall per piece into a buffer of the transfer's own; wait() reduces in rank order.
  std::unique_ptr<Transfer> start_reduce_scatter(const void* send, void* recv, size_t recv_count,
                                                 DType dtype, ReduceOp op) override;
  // MPI_Comm_split; the child inherits max_call_bytes().
  std::unique_ptr<Communicator> split(int color, int key) override;

  // The most bytes one MPI call moves per rank: INT_MAX by default (what an int count names).
  // Lowered by tests, so that the splitting runs on small buffers.
  size_t max_call_bytes() const { return max_call_bytes_; }
  void set_max_call_bytes(size_t bytes);

 private:
  explicit MpiCommunicator(MPI_Comm owned);
  void all_reduce_piece(const void* send, void* recv, size_t count, DType dtype, ReduceOp op);
  void reduce_scatter_piece(const void* send, void* recv, size_t recv_count, DType dtype,
                            ReduceOp op);
  void all_gather_piece(const void* send, void* recv, size_t send_count, DType dtype);
  // Elements per piece when a piece moves `per_element` bytes per element (at least 1).
  size_t piece_elements(size_t per_element) const;
  // Reduces the N contributions laid out back to back in scratch_ into its first slot.
  void reduce_slots(size_t count, DType dtype, ReduceOp op);
  unsigned char* scratch(size_t bytes);

  MPI_Comm comm_;
  bool owned_ = false;  // a split communicator, freed with this object
  int rank_ = 0;
  int world_ = 1;
  std::vector<unsigned char> scratch_;  // reused between calls: no allocation per collective
  std::vector<unsigned char> staging_;  // a split collective's packed piece
  size_t max_call_bytes_;
};

}  // namespace zaya::dist
