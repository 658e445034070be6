// The Communicator over NCCL (RCCL on AMD: the same names, through vendor.h; Debian packages no
// RCCL, so the HIP compile check leaves this file out), for buffers in GPU memory: ZeRO-1's
// buckets, the Muon exchange and `zaya bench comm --device cuda`. Plain C++; the plugin exports it
// (plugin_api.h).
//
// Sums. The Communicator promises sums in rank order (dist/communicator.h), which NCCL's own
// reductions do not keep: a ring or tree adds the contributions in an order set by the topology
// and the algorithm NCCL picks for the size. This one keeps the promise: a reduce-scatter is an
// all-to-all (grouped ncclSend/ncclRecv: rank r receives every rank's chunk r) followed by a local
// reduction that adds the contributions in rank order, element by element, exactly as the MPI
// communicator does. An all-reduce is an all-gather and the same reduction. The bytes on the wire
// are those of a ring's reduce-scatter ((N−1)/N of the buffer per rank); the cost is the
// all-to-all's N−1 simultaneous peers and the scratch of N contributions. A GPU run is then
// bitwise the same whatever NCCL's algorithm and at any node layout, and it sums as an MPI run of
// the same world size does. With rank_order_sums == false the reductions are NCCL's own
// (ncclReduceScatter, ncclAllReduce): the peer `zaya bench comm --device cuda --peer` measures
// the promise against.
//
// NCCL is loaded with dlopen when the first communicator is made ($ZAYA_NCCL, else libnccl.so.2
// on the library path), so the plugin loads on machines without it and a CPU run never maps it.
#pragma once

#include <memory>

#include "dist/communicator.h"

namespace zaya::cuda {

// A communicator of the same ranks as `host` (which must outlive it: the unique id and the
// barrier travel over it), on this process's current GPU. Throws zaya::Error when NCCL cannot be
// loaded or initialised, with the reason.
std::unique_ptr<dist::Communicator> make_nccl_communicator(dist::Communicator& host,
                                                           bool rank_order_sums);

}  // namespace zaya::cuda
