// `--device`: the backend a command's model computes on (train, bench step, score, forward),
// opened from the device registry (backend/device_registry.h, the names and what each is:
// backend/device_list.cpp; `zaya info --devices` lists them).
#pragma once

#include <string>

#include "backend/backend.h"
#include "backend/device_registry.h"
#include "backend/precision.h"

namespace zaya {

// For the flags' help text.
inline constexpr const char* kDeviceFlagHelp =
    "compute on: cpu, cuda (NVIDIA GPU, the CUDA backend plugin), auto (cuda when a GPU and the "
    "plugin are present, else cpu), cpu-as-device (the CPU ops through the copies a GPU takes; "
    "bitwise the cpu results) or cuda-emu (the CUDA backend's kernels run on the CPU by an "
    "emulator that checks them; one rank); `zaya info --devices` lists them";

inline constexpr const char* kPrecisionFlagHelp =
    "fp32, bf16 (matrix products take bf16 weights and activations and accumulate in fp32; the "
    "weights are kept in bf16, with fp32 master weights in the rank's ZeRO-1 range; optimizer, "
    "gradients, residual stream, norms, softmax and loss stay fp32; cuda, or cpu-as-device, "
    "which rounds the weights only) or auto (bf16 on cuda, fp32 elsewhere)";

struct ComputeDevice {
  const Backend* backend = nullptr;
  const DeviceEntry* entry = nullptr;      // the device opened (auto's choice, not auto)
  std::string name;                        // "cpu", "cuda", "cpu-as-device", "cuda-emu"
  Precision precision = Precision::kFp32;  // kFp32 or kBf16 (auto's choice made)
  std::string description;                 // e.g. "cuda (NVIDIA H100 80GB HBM3, 79.1 GiB, fp32)",
                                           // "cpu (no GPU found)"

  const DeviceCapabilities& caps() const { return entry->caps; }
  // A communicator over the device's own collectives (NCCL) of the ranks of `host`; nullptr
  // where the host communicator moves its buffers.
  std::unique_ptr<dist::Communicator> make_collective(dist::Communicator& host,
                                                      bool rank_order_sums) const;
  // Device memory used and total now, where known (caps().memory_figures); zeros otherwise.
  DeviceMemory memory() const;
  // Throws zaya::Error when the device runs one rank only (caps().one_rank) and world > 1.
  void check_world(int world) const;
};

// Opens the device a flag names, in a precision (fp32, bf16 or auto: bf16 where the device
// takes it by default, fp32 elsewhere); throws zaya::Error naming the flag and what was wrong
// (a name not registered, listing those that are; a missing or mismatched plugin, no usable
// GPU, bf16 on a device without it).
ComputeDevice open_device(const std::string& value, Precision precision = Precision::kAuto,
                          const std::string& flag = "--device");

// The device a flag names with auto's choice made (not opened): for the commands that use a
// device's capabilities without its backend (bench gemm|membw).
const DeviceEntry& chosen_device(const std::string& value, const std::string& flag = "--device");

// The CPU backend that keeps "device" memory of its own (the cpu-as-device above); with
// bf16_weights, standing in for the bf16 GPU backend's weights
// (backend/cpu/cpu_as_device_backend.h).
const Backend& cpu_as_device_backend(bool bf16_weights = false);

}  // namespace zaya
