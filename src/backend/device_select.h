// `--device`: the backend a command's model computes on (train, bench step, score, forward).
//   cpu            the CPU op set (backend/cpu), on the host's memory
//   cuda           the CUDA backend, loaded from libzaya_cuda_backend.so
//   (backend/cuda/plugin_api.h) auto           cuda where a GPU and the CUDA backend are present,
//   cpu otherwise (the default) cpu-as-device  the CPU ops on memory the model treats as a
//   device's: every copy --device cuda
//                  makes (weights over, gradients back, the arena off the host), on any machine,
//                  bitwise the cpu results; for checking a run's device path without a GPU
#pragma once

#include <string>

#include "backend/backend.h"

namespace zaya {

namespace cuda {
struct PluginApi;
}

// For the flags' help text.
inline constexpr const char* kDeviceFlagHelp =
    "compute on: cpu, cuda (NVIDIA GPU, the CUDA backend plugin), auto (cuda when a GPU and the "
    "plugin are present, else cpu), cpu-as-device (the CPU ops through the copies a GPU takes; "
    "bitwise the cpu results) or cuda-emu (the CUDA backend's kernels run on the CPU by an emulator "
    "that checks them; one rank)";

inline constexpr const char* kPrecisionFlagHelp =
    "fp32, bf16 (matrix products take bf16 weights and activations and accumulate in fp32; the "
    "weights are kept in bf16, with fp32 master weights in the rank's ZeRO-1 range; optimizer, "
    "gradients, residual stream, norms, softmax and loss stay fp32; cuda, or cpu-as-device, "
    "which rounds the weights only) or auto (bf16 on cuda, fp32 elsewhere)";

struct ComputeDevice {
  const Backend* backend = nullptr;
  std::string name;         // "cpu", "cuda", "cpu-as-device"
  std::string precision;    // "fp32" or "bf16"
  std::string description;  // e.g. "cuda (NVIDIA H100 80GB HBM3, 79.1 GiB, fp32)",
                            // "cpu (no GPU found)"
};

// Opens the device a flag names, in a precision (fp32, bf16 or auto: bf16 on cuda, fp32
// elsewhere); throws zaya::Error naming the flag and what was wrong (an unknown name, a missing
// or mismatched plugin, no usable GPU, bf16 off the GPU).
ComputeDevice open_device(const std::string& value, const std::string& precision = "auto",
                          const std::string& flag = "--device");

// The CUDA plugin, loaded once per process. Throws zaya::Error with the reason it cannot be
// (this zaya built without it, the file missing, a dlopen failure, another build's plugin). The
// plugin's path: $ZAYA_CUDA_BACKEND if set, else libzaya_cuda_backend.so beside the executable.
const cuda::PluginApi& cuda_plugin(const std::string& flag = "--device");

// The plugin with a usable GPU: throws, naming the flag, with the runtime's reason when there is
// none. The first call makes GPU `local rank % visible GPUs` the process's device, before any
// allocation (dist::local_rank).
const cuda::PluginApi& usable_gpu(const std::string& flag = "--device");

// Where cuda_plugin() looks: $ZAYA_CUDA_BACKEND if set, else libzaya_cuda_backend.so beside the
// executable.
std::string cuda_plugin_path();
// The emulated CUDA device's plugin (libzaya_cuda_emu_backend.so beside the binary, or
// $ZAYA_CUDA_EMU_BACKEND): the CUDA backend's sources run on the CPU (backend/cuda_emu/).
const cuda::PluginApi& cuda_emu_plugin(const std::string& flag = "--device");

// Loads the plugin at `path` (uncached): its table, or nullptr with the reason in *error (the
// file missing, a dlopen failure, no entry, another build's interface).
const cuda::PluginApi* load_cuda_plugin(const std::string& path, std::string* error);

// The CPU backend that keeps "device" memory of its own (the cpu-as-device above); with
// bf16_weights, standing in for the bf16 GPU backend's weights
// (backend/cpu/cpu_as_device_backend.h).
const Backend& cpu_as_device_backend(bool bf16_weights = false);

}  // namespace zaya
