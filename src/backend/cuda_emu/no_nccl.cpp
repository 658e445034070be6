// The emulated device has one rank: NCCL is not emulated (issue 26 leaves it out), so the
// plugin's communicator entry says so instead of loading libnccl.
#include "backend/cuda/nccl_communicator.h"
#include "core/error.h"

namespace zaya::cuda {

std::unique_ptr<dist::Communicator> make_nccl_communicator(dist::Communicator&, bool) {
  throw Error(
      "cuda-emu: NCCL is not emulated; the emulated device runs one rank (use --device cpu or "
      "cpu-as-device for several ranks without a GPU)");
}

}  // namespace zaya::cuda
