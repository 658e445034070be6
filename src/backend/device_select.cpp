#include "backend/device_select.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "backend/backend_abi.h"
#include "backend/cpu/cpu_as_device_backend.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/plugin_api.h"
#include "core/error.h"
#include "dist/dist_context.h"

namespace zaya {

namespace {

constexpr const char* kPluginFile = "libzaya_cuda_backend.so";
constexpr const char* kEmulatorFile = "libzaya_cuda_emu_backend.so";

// $variable if set, else `file` beside the running binary.
std::string plugin_path(const char* variable, const char* file) {
  if (const char* env = std::getenv(variable); env && *env) return env;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(file) : (exe.parent_path() / file).string();
}

}  // namespace

std::string cuda_plugin_path() {
  return plugin_path("ZAYA_CUDA_BACKEND", kPluginFile);
}

const cuda::PluginApi& cuda_emu_plugin(const std::string& flag) {
  static std::string error;
  static const cuda::PluginApi* const api =
      load_cuda_plugin(plugin_path("ZAYA_CUDA_EMU_BACKEND", kEmulatorFile), &error);
  ZAYA_CHECK(api != nullptr, flag, " cuda-emu: ", error);
  return *api;
}

const cuda::PluginApi* load_cuda_plugin(const std::string& path, std::string* error) {
  const auto fail = [&](const std::string& why) -> const cuda::PluginApi* {
    *error = why;
    return nullptr;
  };
  if (access(path.c_str(), F_OK) != 0)
    return fail("the CUDA backend " + path +
                " is missing (it is built next to zaya; set ZAYA_CUDA_BACKEND to its path if it "
                "lives elsewhere)");
  // RTLD_LOCAL: the plugin's symbols stay out of the global namespace. The handle is never
  // closed: a backend outlives every model of the process.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return fail("cannot load the CUDA backend " + path + ": " +
                (why ? why : "unknown dlopen error") +
                " (the CUDA runtime and cuBLASLt libraries must be on the library path)");
  }
  using Entry = const cuda::PluginApi* (*)();
  const auto entry = reinterpret_cast<Entry>(dlsym(handle, "zaya_cuda_plugin"));
  if (entry == nullptr)
    return fail("the CUDA backend " + path + " has no zaya_cuda_plugin entry: not a zaya plugin");
  const cuda::PluginApi* api = entry();
  if (api == nullptr || api->abi == nullptr || std::string(api->abi) != kBackendAbi)
    return fail("the CUDA backend " + path + " comes from another zaya build (its interface " +
                (api && api->abi ? api->abi : "unknown") + ", this zaya's " + kBackendAbi +
                "): rebuild both from one source tree");
  error->clear();
  return api;
}

const Backend& cpu_as_device_backend(bool bf16_weights) {
  static const CpuAsDeviceBackend fp32(false), bf16(true);
  return bf16_weights ? bf16 : fp32;
}

const cuda::PluginApi& cuda_plugin(const std::string& flag) {
  // Loaded once; later calls get the first outcome, the table or the same error.
  static std::string error;
  static const cuda::PluginApi* const api = [] {
#ifndef ZAYA_CUDA_PLUGIN_BUILT
    if (std::getenv("ZAYA_CUDA_BACKEND") == nullptr) {
      error =
          "this zaya was built without the CUDA backend (CMake found no nvcc; configure with "
          "-DZAYA_CUDA=ON where the CUDA toolkit is installed)";
      return static_cast<const cuda::PluginApi*>(nullptr);
    }
#endif
    return load_cuda_plugin(cuda_plugin_path(), &error);
  }();
  ZAYA_CHECK(api != nullptr, flag, " cuda: ", error);
  return *api;
}

const cuda::PluginApi& usable_gpu(const std::string& flag) {
  const cuda::PluginApi& api = cuda_plugin(flag);
  const std::string why = api.unavailable_reason();
  ZAYA_CHECK(why.empty(), flag, " cuda: no usable GPU (", why, ")");
  // Once per process, before the first allocation: each local rank takes its own GPU.
  static const int selected = api.select_device(dist::local_rank());
  (void)selected;
  return api;
}

namespace {

// The device alone, in fp32 (open_device settles the precision).
ComputeDevice open_device_fp32(const std::string& value, const std::string& flag) {
  ComputeDevice d;
  d.precision = "fp32";
  if (value == "cpu") {
    d.backend = &cpu_backend();
    d.name = d.description = "cpu";
  } else if (value == "cpu-as-device") {
    d.backend = &cpu_as_device_backend();
    d.name = "cpu-as-device";
    d.description = "cpu-as-device (the CPU ops through the copies a GPU takes)";
  } else if (value == "cuda") {
    const cuda::PluginApi& api = usable_gpu(flag);
    d.backend = &api.backend(false);
    d.name = "cuda";
    d.description = "cuda (" + api.device_summary() + ")";
  } else if (value == "cuda-emu") {
    const cuda::PluginApi& api = cuda_emu_plugin(flag);
    d.backend = &api.backend(false);
    d.name = "cuda-emu";
    d.description = "cuda-emu (" + api.device_summary() + ")";
  } else if (value == "auto") {
    // The device nodes first: a machine without an NVIDIA driver never maps the CUDA libraries.
    const bool gpu_nodes = access("/dev/nvidiactl", F_OK) == 0 || access("/dev/nvidia0", F_OK) == 0;
    if (!gpu_nodes) {
      d = open_device_fp32("cpu", flag);
      d.description = "cpu (no GPU found)";
      return d;
    }
    try {
      return open_device_fp32("cuda", flag);
    } catch (const Error& e) {
      d = open_device_fp32("cpu", flag);
      d.description = std::string("cpu (a GPU is present but unusable: ") + e.what() + ")";
    }
  } else {
    ZAYA_FAIL(flag, ": '", value,
              "' is not a device (expected cpu, cuda, auto, cpu-as-device or cuda-emu)");
  }
  return d;
}

}  // namespace

ComputeDevice open_device(const std::string& value, const std::string& precision,
                          const std::string& flag) {
  ZAYA_CHECK(precision == "auto" || precision == "fp32" || precision == "bf16", "--precision: '",
             precision, "' is not a precision (expected fp32, bf16 or auto)");
  ComputeDevice d = open_device_fp32(value, flag);
  const bool gpu = d.name == "cuda" || d.name == "cuda-emu";
  if (precision == "bf16" || (precision == "auto" && gpu)) {
    ZAYA_CHECK(gpu || d.name == "cpu-as-device", "--precision bf16: the ", d.name,
               " backend computes in fp32 (bf16 GEMM inputs run on GPUs: --device cuda; "
               "cpu-as-device stands in for their bf16 weights)");
    if (gpu) {
      d.backend = &(d.name == "cuda" ? cuda_plugin(flag) : cuda_emu_plugin(flag)).backend(true);
    } else {
      d.backend = &cpu_as_device_backend(true);
      d.description =
          "cpu-as-device (the CPU ops through the copies a GPU takes, with its bf16 "
          "weights: products read the weights rounded to bf16, activations fp32)";
    }
    d.precision = "bf16";
  }
  if (gpu) {
    d.description.pop_back();  // ")"
    d.description += d.precision == "bf16" ? ", bf16 GEMM inputs, fp32 accumulation)" : ", fp32)";
  }
  return d;
}

}  // namespace zaya
