// The devices of the registry (backend/device_registry.h), in the order `--device` lists them.
// Adding a device is a folder with its backend (a plugin: CMake's zaya_backend_plugin) and an
// entry here (docs/backends.md).
#include <unistd.h>

#include "backend/cpu/cpu_as_device_backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/device_registry.h"
#include "backend/device_select.h"

namespace zaya {

namespace {

DeviceEntry cpu_device() {
  DeviceEntry e;
  e.name = "cpu";
  e.help = "the CPU op set (backend/cpu), on the host's memory";
  e.unavailable_reason = [] { return std::string(); };
  e.open = [](bool, const std::string&) {
    ComputeDevice d;
    d.backend = &cpu_backend();
    d.name = d.description = "cpu";
    return d;
  };
  return e;
}

DeviceEntry cpu_as_device() {
  DeviceEntry e;
  e.name = "cpu-as-device";
  e.help =
      "the CPU ops on memory the model treats as a device's: every copy a GPU takes, bitwise the "
      "cpu results; bf16 stands in for a GPU's bf16 weights";
  e.caps.own_memory = true;
  e.caps.bf16 = true;
  e.caps.memory_figures = true;  // counted: no total, the plan is checked with --device-memory
  e.memory = [] {
    const CountedMemory m = cpu_as_device_memory();
    return DeviceMemory{m.used, 0, m.peak};
  };
  e.unavailable_reason = [] { return std::string(); };
  e.open = [](bool bf16, const std::string&) {
    ComputeDevice d;
    d.backend = &cpu_as_device_backend(bf16);
    d.name = "cpu-as-device";
    d.description = bf16 ? "cpu-as-device (the CPU ops through the copies a GPU takes, with its "
                           "bf16 weights: products read the weights rounded to bf16, activations "
                           "fp32)"
                         : "cpu-as-device (the CPU ops through the copies a GPU takes)";
    return d;
  };
  return e;
}

// The GPU's capabilities, which the emulated device shares but for its one rank.
DeviceCapabilities gpu_capabilities() {
  DeviceCapabilities c;
  c.own_memory = c.bf16 = c.bf16_by_default = c.memory_figures = c.timings = true;
  return c;
}

DeviceEntry cuda_device() {
  PluginDevice p;
  p.name = "cuda";
  p.help = "NVIDIA GPU: the CUDA backend plugin (backend/cuda), one GPU per local rank";
  p.file = "libzaya_cuda_backend.so";
  p.env = "ZAYA_CUDA_BACKEND";
#ifndef ZAYA_CUDA_PLUGIN_BUILT
  p.not_built =
      "this zaya was built without the CUDA backend (CMake found no nvcc; configure with "
      "-DZAYA_CUDA=ON where the CUDA toolkit is installed)";
#endif
  p.caps = gpu_capabilities();
  p.caps.own_collectives = true;
  return plugin_device(p);
}

DeviceEntry cuda_emu_device() {
  PluginDevice p;
  p.name = "cuda-emu";
  p.help =
      "the CUDA backend's kernels run on the CPU by an emulator that checks them "
      "(backend/cuda_emu)";
  p.file = "libzaya_cuda_emu_backend.so";
  p.env = "ZAYA_CUDA_EMU_BACKEND";
  p.caps = gpu_capabilities();
  p.caps.one_rank = true;  // NCCL is not emulated
  return plugin_device(p);
}

// auto: cuda where a GPU and the plugin are present, cpu otherwise.
DeviceEntry auto_rule() {
  DeviceEntry e;
  e.name = "auto";
  e.help = "cuda where a GPU and the CUDA backend are present, else cpu (the default)";
  e.choose = [](std::string* why, const std::string& flag) -> std::string {
    // The device nodes first: a machine without an NVIDIA driver never maps the CUDA libraries.
    if (access("/dev/nvidiactl", F_OK) != 0 && access("/dev/nvidia0", F_OK) != 0) {
      *why = "no GPU found";
      return "cpu";
    }
    const std::string unusable = find_device("cuda").unavailable_reason();
    if (unusable.empty()) return "cuda";
    *why = "a GPU is present but unusable: " + flag + " cuda: " + unusable;
    return "cpu";
  };
  return e;
}

}  // namespace

const std::vector<DeviceEntry>& registered_devices() {
  static const std::vector<DeviceEntry> devices{cpu_device(), cuda_device(), auto_rule(),
                                                cpu_as_device(), cuda_emu_device()};
  return devices;
}

}  // namespace zaya
