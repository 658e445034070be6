// Collective communication between the ranks of one training job. The Communicator is the only
// thing the trainer and `zaya bench comm` talk to: MPI over host memory, or NCCL/RCCL over GPU
// memory (backend/cuda/nccl_communicator.h) behind the same interface.
//
// Conventions (the same as NCCL, so the bench measures like nccl-tests):
//  - counts are elements, buffers are host memory of `dtype` elements, or GPU memory where
//    device_memory() says so;
//  - all_reduce: send and recv hold `count` elements; send == recv is in-place;
//  - reduce_scatter: send holds recv_count * world_size elements (equal chunks: rank r gets chunk
//    r); callers with a count not divisible by the world size pad it. In-place is
//    recv == send + rank * recv_count;
//  - all_gather: send holds send_count elements, recv send_count * world_size; in-place is
//    send == recv + rank * send_count;
//  - broadcast: root's send is copied into every rank's recv; send == recv is in-place and only
//    root's send is read;
//  - send/recv: blocking point-to-point, matched by peer and tag;
//  - start_sendrecv: one send and one receive at once (a ring step), in flight until wait();
//    a peer of -1 skips that side (the ends of an open chain);
//  - start_reduce_scatter: reduce_scatter in flight until wait() (ZeRO-1's buckets overlap the
//    backward with it); the same result, bitwise, as the blocking call;
//  - start_reduce: every rank's `count` elements reduced onto `root` only, in flight until
//    wait() (ZeRO-2 moves each range to its owner); root's element is bitwise the one
//    reduce_scatter gives for the same contributions;
//  - split: the sub-communicator of the ranks that pass the same color, ranked by key (a data
//    group or a context group of a rank grid).
// Sums are deterministic: every implementation adds contributions in rank order 0..N-1, so the
// same inputs on the same world size give bitwise-identical results whatever the timing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/tensor.h"

namespace zaya::dist {

enum class ReduceOp { Sum, Max, Min };

// The bytes of `count` elements of `dtype` (what a collective moves, for traces and reports).
inline int64_t payload_bytes(size_t count, DType dtype) {
  return int64_t(count * dtype_size(dtype));
}
const char* reduce_op_name(ReduceOp op);  // "sum", "max", "min"

// A point-to-point transfer in flight (start_sendrecv). wait() completes it; the destructor waits
// too, so a transfer never outlives the buffers of the scope that started it.
class Transfer {
 public:
  virtual ~Transfer() = default;
  virtual void wait() = 0;
  // Lets the transfer advance without blocking, and says whether it has arrived (then wait()
  // returns at once). MPI libraries without a progress thread (Open MPI's default) move a
  // non-blocking collective only inside MPI calls, so a caller that computes between start and
  // wait calls this at convenient points. The default knows nothing: false.
  virtual bool test() { return false; }
};

// A transfer that completed when it started (the blocking fallbacks).
class CompletedTransfer final : public Transfer {
 public:
  void wait() override {}
  bool test() override { return true; }
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string kind() const = 0;  // "local", "mpi", "nccl"
  // True when the buffers are GPU memory (NCCL), false for host memory. Scalars the host holds
  // (a loss, a norm) go over a host communicator.
  virtual bool device_memory() const { return false; }

  virtual void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) = 0;
  virtual void reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype,
                              ReduceOp op) = 0;
  virtual void all_gather(const void* send, void* recv, size_t send_count, DType dtype) = 0;
  virtual void broadcast(const void* send, void* recv, size_t count, DType dtype, int root) = 0;
  virtual void send(const void* buf, size_t count, DType dtype, int peer, int tag) = 0;
  virtual void recv(void* buf, size_t count, DType dtype, int peer, int tag) = 0;
  virtual void barrier() = 0;
  // Sends send_count elements to `dest` while receiving recv_count from `src`; either side may be
  // -1 (nothing to send or to receive). The buffers must stay untouched until wait().
  virtual std::unique_ptr<Transfer> start_sendrecv(const void* send, size_t send_count, int dest,
                                                   void* recv, size_t recv_count, int src,
                                                   DType dtype, int tag) = 0;
  // reduce_scatter that returns while the data moves: send must stay untouched and recv unread
  // until wait(), which reduces (in rank order) and writes recv. Several may be in flight; every
  // rank starts them in the same order. The default runs the blocking call.
  virtual std::unique_ptr<Transfer> start_reduce_scatter(const void* send, void* recv,
                                                         size_t recv_count, DType dtype,
                                                         ReduceOp op);
  // reduce to one rank that returns while the data moves: on `root`, recv receives c_0 ∘ c_1 ∘ …
  // ∘ c_{N−1} (rank order) at wait(); the other ranks' recv is not written (nullptr is fine).
  // send stays untouched until wait(). Several may be in flight; every rank starts them in the
  // same order. The default sends each contribution to root (start_sendrecv) and reduces there
  // on the host: a communicator over device memory overrides it.
  virtual std::unique_ptr<Transfer> start_reduce(const void* send, void* recv, size_t count,
                                                 DType dtype, ReduceOp op, int root);
  // Collective over this communicator: every rank passes a color and a key and gets the
  // communicator of the ranks with its color, ranked by (key, rank).
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
};

// start_sendrecv(...) then wait(): the blocking form.
void sendrecv(Communicator& comm, const void* send, size_t send_count, int dest, void* recv,
              size_t recv_count, int src, DType dtype, int tag);

// MPI when this build has it and the process was started by a launcher (mpirun, srun, PMI);
// otherwise the one-process communicator. Fails when a launcher started several ranks but the
// build has no MPI, rather than silently training N independent copies.
std::unique_ptr<Communicator> make_communicator();

}  // namespace zaya::dist
