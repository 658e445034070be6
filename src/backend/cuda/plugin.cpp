// The one exported symbol of the plugins built from these sources (backend/plugin_api.h):
// libzaya_cuda_backend.so, and libzaya_cuda_emu_backend.so (the same sources on the emulated
// device, backend/cuda_emu/). Each is built by CMake's zaya_backend_plugin().
#include "backend/backend_abi.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device.h"
#include "backend/cuda/nccl_communicator.h"
#include "backend/cuda/timing.h"
#include "backend/plugin_api.h"

extern "C" __attribute__((visibility("default"))) const zaya::BackendPlugin* zaya_backend_plugin() {
  const auto backend = [](bool bf16) -> const zaya::Backend& {
    return bf16 ? zaya::cuda_bf16_backend() : zaya::cuda_backend();
  };
  static const zaya::BackendPlugin api{
      zaya::kBackendAbi,
      &zaya::cuda::unavailable_reason,
      &zaya::cuda::device_summary,
      &zaya::cuda::select_device,
      backend,
      &zaya::cuda::time_gemm,
      &zaya::cuda::time_stream_kernel,
      &zaya::cuda::device_memory,
      &zaya::cuda::make_nccl_communicator,
  };
  return &api;
}
