// The one exported symbol of libzaya_cuda_backend.so (plugin_api.h): the table of what `zaya`
// calls in the CUDA backend after loading it with dlopen.
#include "backend/backend_abi.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device.h"
#include "backend/cuda/nccl_communicator.h"
#include "backend/cuda/plugin_api.h"
#include "backend/cuda/timing.h"

extern "C" __attribute__((visibility("default"))) const zaya::cuda::PluginApi* zaya_cuda_plugin() {
  const auto backend = [](bool bf16) -> const zaya::Backend& {
    return bf16 ? zaya::cuda_bf16_backend() : zaya::cuda_backend();
  };
  static const zaya::cuda::PluginApi api{
      zaya::kBackendAbi,
      &zaya::cuda::unavailable_reason,
      &zaya::cuda::device_summary,
      &zaya::cuda::select_device,
      backend,
      &zaya::cuda::time_gemm,
      &zaya::cuda::time_stream_kernel,
      &zaya::cuda::device_memory_used,
      &zaya::cuda::make_nccl_communicator,
  };
  return &api;
}
