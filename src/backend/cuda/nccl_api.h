// NCCL's entry points, resolved with dlopen/dlsym at first use (nccl_communicator.h says why).
#pragma once

#if defined(ZAYA_HIP)
#include <rccl/rccl.h>  // RCCL keeps NCCL's names
#else
#include <nccl.h>
#endif

namespace zaya::cuda {

struct NcclApi {
  decltype(&ncclGetUniqueId) get_unique_id;
  decltype(&ncclCommInitRank) comm_init_rank;
  decltype(&ncclCommDestroy) comm_destroy;
  decltype(&ncclCommAbort) comm_abort;
  decltype(&ncclCommGetAsyncError) comm_get_async_error;
  decltype(&ncclGetErrorString) error_string;
  decltype(&ncclGroupStart) group_start;
  decltype(&ncclGroupEnd) group_end;
  decltype(&ncclSend) send;
  decltype(&ncclRecv) recv;
  decltype(&ncclAllGather) all_gather;
  decltype(&ncclBroadcast) broadcast;
  decltype(&ncclAllReduce) all_reduce;
  decltype(&ncclReduceScatter) reduce_scatter;
  decltype(&ncclReduce) reduce;
};

// The library, loaded once; throws zaya::Error naming the file and dlopen's reason.
const NcclApi& nccl();

}  // namespace zaya::cuda
