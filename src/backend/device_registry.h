// The devices `--device` names, as a registry (docs/backends.md). Each device registers itself
// (backend/device_list.cpp) with its name, whether it is usable here and why not, and what it can
// do (DeviceCapabilities), so that callers ask for a capability instead of comparing names. A
// device is built in (cpu, cpu-as-device), or a plugin beside `zaya` (backend/plugin_api.h: cuda,
// cuda-emu) described by a PluginDevice; a choice rule (auto) picks one of the others.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace zaya {

struct BackendPlugin;
struct ComputeDevice;
namespace dist {
class Communicator;
}

// What a device can do, known without opening it.
struct DeviceCapabilities {
  // Its memory is its own (the model keeps device copies and crosses to it); else the host's.
  bool own_memory = false;
  // Takes --precision bf16, and --precision auto means bf16 on it.
  bool bf16 = false;
  bool bf16_by_default = false;
  // Runs one rank only (the emulated device: its collectives are not emulated).
  bool one_rank = false;
  // Collectives of its own (NCCL) move its buffers between ranks; else the host communicator
  // (MPI, or one process) does, on its memory.
  bool own_collectives = false;
  // Device memory used and total are known (DeviceEntry::memory).
  bool memory_figures = false;
  // Timings of its own products and STREAM kernels (bench gemm|membw; the plugin's).
  bool timings = false;

  bool operator==(const DeviceCapabilities&) const = default;
};

struct DeviceMemory {
  size_t used = 0, total = 0;
  // The most zaya's own allocations held at once so far, where the device counts them (not the
  // context's or libraries' memory); 0: not known.
  size_t peak = 0;
};

struct DeviceEntry {
  std::string name;
  std::string help;  // what it is, one line
  DeviceCapabilities caps;
  // Empty when usable here; otherwise why not (no plugin, no GPU, ...).
  std::function<std::string()> unavailable_reason;
  // Opens the (usable) device: its backend in fp32 or, where caps.bf16, bf16, and a description;
  // throws zaya::Error naming `flag` when it is not usable.
  std::function<ComputeDevice(bool bf16, const std::string& flag)> open;
  // A choice rule instead of a device (auto): the name of the device it takes here, and why
  // when that is worth saying ("no GPU found").
  std::function<std::string(std::string* why, const std::string& flag)> choose;
  // Plugin devices: the loaded, usable plugin (the timings); empty for the built-in ones.
  std::function<const BackendPlugin&(const std::string& flag)> plugin;
  // Where caps.own_collectives: a communicator over them of the ranks of `host`.
  std::function<std::unique_ptr<dist::Communicator>(dist::Communicator& host, bool rank_order_sums)>
      make_collective;
  // Where caps.memory_figures: device memory used and total now.
  std::function<DeviceMemory()> memory;
};

// A device whose backend is a plugin beside `zaya` (backend/plugin_api.h).
struct PluginDevice {
  std::string name, help;
  std::string file;       // libzaya_..._backend.so, looked for beside the executable
  std::string env;        // a variable that names the plugin's path instead
  std::string not_built;  // non-empty: this zaya was built without it, and why
  DeviceCapabilities caps;
};
DeviceEntry plugin_device(const PluginDevice& spec);

// The registered devices, in registration order (backend/device_list.cpp).
const std::vector<DeviceEntry>& registered_devices();
// The device named `name`; throws zaya::Error naming `flag` and listing the registered devices,
// with which are usable here and why not, when none is.
const DeviceEntry& find_device(const std::string& name, const std::string& flag = "--device");
// The registry as `zaya info --devices` prints it: a device a line, whether it is usable here
// (why not), what it can do, what it is.
std::string device_listing();
// The capabilities in words ("own memory, bf16 (default), NCCL collectives, ...").
std::string capabilities_text(const DeviceCapabilities& caps);

// A plugin's path: $env if set, else `file` beside the running binary.
std::string plugin_path(const std::string& env, const std::string& file);
// Loads the plugin at `path` (uncached): its table, or nullptr with the reason in *error (the
// file missing, a dlopen failure, no entry, another build's interface).
// `env`, where given, is named in the message for a missing file.
const BackendPlugin* load_backend_plugin(const std::string& path, std::string* error,
                                         const std::string& env = "");

}  // namespace zaya
