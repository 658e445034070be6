// Collective communication between the ranks of one training job. The Communicator is the only
// thing the trainer and `zaya bench comm` talk to, so a later NCCL/RCCL implementation slots in
// behind the same interface.
//
// Conventions (the same as NCCL, so the bench measures like nccl-tests):
//  - counts are elements, buffers are host memory of `dtype` elements;
//  - all_reduce: send and recv hold `count` elements; send == recv is in-place;
//  - reduce_scatter: send holds recv_count * world_size elements (equal chunks: rank r gets chunk
//    r); callers with a count not divisible by the world size pad it. In-place is
//    recv == send + rank * recv_count;
//  - all_gather: send holds send_count elements, recv send_count * world_size; in-place is
//    send == recv + rank * send_count;
//  - broadcast: root's send is copied into every rank's recv; send == recv is in-place and only
//    root's send is read;
//  - send/recv: blocking point-to-point, matched by peer and tag.
// Sums are deterministic: every implementation adds contributions in rank order 0..N-1, so the
// same inputs on the same world size give bitwise-identical results whatever the timing.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "core/tensor.h"

namespace zaya::dist {

enum class ReduceOp { Sum, Max, Min };
const char* reduce_op_name(ReduceOp op);  // "sum", "max", "min"

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string kind() const = 0;  // "local", "mpi"

  virtual void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) = 0;
  virtual void reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype,
                              ReduceOp op) = 0;
  virtual void all_gather(const void* send, void* recv, size_t send_count, DType dtype) = 0;
  virtual void broadcast(const void* send, void* recv, size_t count, DType dtype, int root) = 0;
  virtual void send(const void* buf, size_t count, DType dtype, int peer, int tag) = 0;
  virtual void recv(void* buf, size_t count, DType dtype, int peer, int tag) = 0;
  virtual void barrier() = 0;
};

// MPI when this build has it and the process was started by a launcher (mpirun, srun, PMI);
// otherwise the one-process communicator. Fails when a launcher started several ranks but the
// build has no MPI, rather than silently training N independent copies.
std::unique_ptr<Communicator> make_communicator();

}  // namespace zaya::dist
