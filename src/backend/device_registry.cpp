#include "backend/device_registry.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

#include "backend/backend_abi.h"
#include "backend/device_select.h"
#include "backend/plugin_api.h"
#include "core/error.h"
#include "dist/dist_context.h"

namespace zaya {

std::string plugin_path(const std::string& env, const std::string& file) {
  if (const char* value = std::getenv(env.c_str()); value && *value) return value;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? file : (exe.parent_path() / file).string();
}

const BackendPlugin* load_backend_plugin(const std::string& path, std::string* error,
                                         const std::string& env) {
  const auto fail = [&](const std::string& why) -> const BackendPlugin* {
    *error = why;
    return nullptr;
  };
  if (access(path.c_str(), F_OK) != 0)
    return fail("the backend plugin " + path + " is missing (it is built next to zaya; set " +
                (env.empty() ? "its variable" : env) + " to its path if it lives elsewhere)");
  // RTLD_LOCAL: the plugin's symbols stay out of the global namespace. The handle is never
  // closed: a backend outlives every model of the process.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return fail("cannot load the backend plugin " + path + ": " +
                (why ? why : "unknown dlopen error") +
                " (the libraries it links, such as the CUDA runtime and cuBLASLt, must be on the "
                "library path)");
  }
  using Entry = const BackendPlugin* (*)();
  const auto entry = reinterpret_cast<Entry>(dlsym(handle, "zaya_backend_plugin"));
  if (entry == nullptr)
    return fail("the backend plugin " + path +
                " has no zaya_backend_plugin entry: not a zaya plugin");
  const BackendPlugin* api = entry();
  if (api == nullptr || api->abi == nullptr || std::string(api->abi) != kBackendAbi)
    return fail("the backend plugin " + path + " comes from another zaya build (its interface " +
                (api && api->abi ? api->abi : "unknown") + ", this zaya's " + kBackendAbi +
                "): rebuild both from one source tree");
  error->clear();
  return api;
}

namespace {

// A plugin loaded once per path (a path named by the environment may change between calls, in
// the tests), and whether this process has selected its device yet.
struct LoadedPlugin {
  const BackendPlugin* api = nullptr;
  std::string error;
  bool selected = false;
};

LoadedPlugin& loaded_plugin(const PluginDevice& spec) {
  static std::mutex mutex;
  static std::map<std::string, LoadedPlugin> loaded;
  const bool named = std::getenv(spec.env.c_str()) != nullptr;
  const std::string path = plugin_path(spec.env, spec.file);
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, fresh] = loaded.try_emplace(path);
  if (fresh) {
    if (!spec.not_built.empty() && !named)
      it->second.error = spec.not_built;
    else
      it->second.api = load_backend_plugin(path, &it->second.error, spec.env);
  }
  return it->second;
}

// Empty when the plugin loads and has a device; otherwise why not.
std::string plugin_unavailable(const PluginDevice& spec) {
  const LoadedPlugin& p = loaded_plugin(spec);
  if (p.api == nullptr) return p.error;
  const std::string why = p.api->unavailable_reason();
  return why.empty() ? why : "no usable GPU (" + why + ")";
}

// The plugin with a usable device: the first call makes device `local rank % visible devices`
// the process's, before any allocation (dist::local_rank).
const BackendPlugin& usable_plugin(const PluginDevice& spec, const std::string& flag) {
  const std::string why = plugin_unavailable(spec);
  ZAYA_CHECK(why.empty(), flag, " ", spec.name, ": ", why);
  static std::mutex mutex;
  LoadedPlugin& p = loaded_plugin(spec);
  std::lock_guard<std::mutex> lock(mutex);
  if (!p.selected) p.api->select_device(dist::local_rank());
  p.selected = true;
  return *p.api;
}

}  // namespace

DeviceEntry plugin_device(const PluginDevice& spec) {
  DeviceEntry e;
  e.name = spec.name;
  e.help = spec.help;
  e.caps = spec.caps;
  e.unavailable_reason = [spec] { return plugin_unavailable(spec); };
  e.plugin = [spec](const std::string& flag) -> const BackendPlugin& {
    return usable_plugin(spec, flag);
  };
  e.open = [spec](bool bf16, const std::string& flag) {
    const BackendPlugin& api = usable_plugin(spec, flag);
    ComputeDevice d;
    d.backend = &api.backend(bf16);
    d.name = spec.name;
    d.description = spec.name + " (" + api.device_summary() +
                    (bf16 ? ", bf16 GEMM inputs, fp32 accumulation)" : ", fp32)");
    return d;
  };
  if (spec.caps.own_collectives)
    e.make_collective = [spec](dist::Communicator& host, bool rank_order_sums) {
      return usable_plugin(spec, "--device").make_collective(host, rank_order_sums);
    };
  if (spec.caps.memory_figures)
    e.memory = [spec] {
      DeviceMemory m;
      usable_plugin(spec, "--device").device_memory(&m.used, &m.total, &m.peak);
      return m;
    };
  return e;
}

namespace {

// "cpu, cuda, auto, cpu-as-device or cuda-emu"
std::string registered_names() {
  const std::vector<DeviceEntry>& all = registered_devices();
  std::string names;
  for (size_t i = 0; i < all.size(); ++i)
    names += (i == 0 ? "" : i + 1 == all.size() ? " or " : ", ") + all[i].name;
  return names;
}

}  // namespace

const DeviceEntry& find_device(const std::string& name, const std::string& flag) {
  for (const DeviceEntry& e : registered_devices())
    if (e.name == name) return e;
  ZAYA_FAIL(flag, ": '", name, "' is not a device (expected ", registered_names(),
            "); the registered devices:\n", device_listing());
}

std::string capabilities_text(const DeviceCapabilities& c) {
  std::string t = c.own_memory ? "own memory" : "host memory";
  t += c.bf16 ? (c.bf16_by_default ? ", bf16 (the default)" : ", bf16") : ", fp32 only";
  t += c.own_collectives ? ", NCCL collectives" : ", host collectives (MPI)";
  if (c.one_rank) t += ", one rank only";
  if (c.memory_figures) t += ", memory figures";
  if (c.timings) t += ", timings (bench gemm|membw)";
  return t;
}

std::string device_listing() {
  std::string out;
  for (const DeviceEntry& e : registered_devices()) {
    std::string status;
    if (e.choose) {
      std::string why;
      const std::string chosen = e.choose(&why, "--device");
      status = "a choice: " + chosen + " here" + (why.empty() ? "" : " (" + why + ")");
    } else {
      const std::string why = e.unavailable_reason();
      status = why.empty() ? "usable here" : "not usable here: " + why;
    }
    out += "  " + e.name + std::string(e.name.size() < 14 ? 14 - e.name.size() : 1, ' ') + status +
           "\n" + std::string(16, ' ') + e.help + "\n";
    if (!e.choose) out += std::string(16, ' ') + capabilities_text(e.caps) + "\n";
  }
  return out;
}

}  // namespace zaya
