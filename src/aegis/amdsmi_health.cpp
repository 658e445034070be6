// AMD SMI (libamd_smi.so, ROCm's system management library) as a GpuHealthLibrary
// (aegis/gpu_health.h): each GPU's ECC counts and temperature.
#include <cstdint>
#include <utility>

#include "aegis/gpu_health.h"
#include "aegis/loaded_library.h"
#include "core/error.h"

// amdsmi_error_count_t under its C name (a call through zaya's pointer then has the type of the
// function it reaches): the two counts first; later versions add fields (deferred errors,
// reserved words), so the library writes into room for all of them.
struct amdsmi_error_count_t {
  uint64_t correctable_count, uncorrectable_count;
  uint64_t later_fields[14];
};

namespace zaya::aegis {

namespace {

// AMD SMI's C interface, as its header (amdsmi.h) documents it: the functions zaya calls, their
// argument types and the constants it passes; opened at run time like NVML.
namespace amdsmi {
using Status = int;    // amdsmi_status_t
using Handle = void*;  // amdsmi_socket_handle, amdsmi_processor_handle
using ErrorCount = amdsmi_error_count_t;
constexpr Status kSuccess = 0, kNotSupported = 2;
constexpr uint64_t kInitAmdGpus = 1u << 1;
constexpr int kTemperatureHotspot = 1, kTemperatureCurrent = 0;
constexpr unsigned int kUuidBuffer = 96;
}  // namespace amdsmi

class AmdSmiLibrary final : public GpuHealthLibrary {
 public:
  explicit AmdSmiLibrary(const std::string& library)
      : lib_("AMD SMI", library.empty() ? "libamd_smi.so" : library,
             "is ROCm installed? its lib directory on LD_LIBRARY_PATH, or amdsmi:PATH") {
    resolve();
    check(init_(amdsmi::kInitAmdGpus), "amdsmi_init");
    try {
      find_gpus();
    } catch (...) {
      shut_down_();
      throw;
    }
  }
  ~AmdSmiLibrary() override { shut_down_(); }  // the library itself closes with lib_
  AmdSmiLibrary(const AmdSmiLibrary&) = delete;
  AmdSmiLibrary& operator=(const AmdSmiLibrary&) = delete;

  std::string describe() const override {
    return "AMD SMI (" + lib_.file() + "), " + std::to_string(gpus_.size()) + " GPUs";
  }

  std::vector<MetricSample> read() override {
    std::vector<MetricSample> out;
    for (const Gpu& g : gpus_) {
      const std::map<std::string, std::string> labels = {{"gpu", g.index}, {"uuid", g.uuid}};
      amdsmi::ErrorCount ec{};
      if (answered(ecc_count_(g.handle, &ec), g, "amdsmi_get_gpu_total_ecc_count")) {
        auto l = labels;
        l["type"] = "uncorrected";
        out.push_back({"zaya_gpu_ecc_errors_total", l, double(ec.uncorrectable_count)});
        l["type"] = "corrected";
        out.push_back({"zaya_gpu_ecc_errors_total", l, double(ec.correctable_count)});
      }
      int64_t celsius = 0;
      if (answered(temperature_(g.handle, amdsmi::kTemperatureHotspot, amdsmi::kTemperatureCurrent,
                                &celsius),
                   g, "amdsmi_get_temp_metric"))
        out.push_back({"zaya_gpu_temperature_celsius", labels, double(celsius)});
    }
    return out;
  }

 private:
  struct Gpu {
    amdsmi::Handle handle = nullptr;
    std::string index, uuid;
  };

  template <class F>
  void symbol(F& f, const char* name) {
    lib_.resolve(f, name, "a ROCm older than zaya needs (6.0 or later)");
  }
  void resolve() {
    symbol(init_, "amdsmi_init");
    symbol(shut_down_, "amdsmi_shut_down");
    symbol(status_string_, "amdsmi_status_code_to_string");
    symbol(socket_handles_, "amdsmi_get_socket_handles");
    symbol(processor_handles_, "amdsmi_get_processor_handles");
    symbol(uuid_, "amdsmi_get_gpu_device_uuid");
    symbol(ecc_count_, "amdsmi_get_gpu_total_ecc_count");
    symbol(temperature_, "amdsmi_get_temp_metric");
  }
  std::string error(amdsmi::Status s) const {
    const char* text = nullptr;
    if (status_string_) status_string_(s, &text);
    return std::string(text ? text : "unknown error") + " (" + std::to_string(s) + ")";
  }
  void check(amdsmi::Status s, const char* call) const {
    ZAYA_CHECK(s == amdsmi::kSuccess, "AMD SMI (", lib_.file(), "): ", call, " failed: ", error(s));
  }
  bool answered(amdsmi::Status s, const Gpu& g, const char* call) const {
    if (s == amdsmi::kSuccess) return true;
    if (s == amdsmi::kNotSupported) return false;
    ZAYA_FAIL("AMD SMI (", lib_.file(), "): ", call, " on GPU ", g.index, " failed: ", error(s));
  }
  // Every socket's GPUs, in the library's order (what amd-smi numbers them by).
  void find_gpus() {
    uint32_t sockets = 0;
    check(socket_handles_(&sockets, nullptr), "amdsmi_get_socket_handles");
    std::vector<amdsmi::Handle> socket(sockets);
    check(socket_handles_(&sockets, socket.data()), "amdsmi_get_socket_handles");
    for (uint32_t s = 0; s < sockets; ++s) {
      uint32_t count = 0;
      check(processor_handles_(socket[s], &count, nullptr), "amdsmi_get_processor_handles");
      std::vector<amdsmi::Handle> gpus(count);
      check(processor_handles_(socket[s], &count, gpus.data()), "amdsmi_get_processor_handles");
      for (uint32_t i = 0; i < count; ++i) {
        Gpu g;
        g.handle = gpus[i];
        g.index = std::to_string(gpus_.size());
        char uuid[amdsmi::kUuidBuffer] = {};
        unsigned int length = sizeof uuid;
        check(uuid_(g.handle, &length, uuid), "amdsmi_get_gpu_device_uuid");
        g.uuid = uuid;
        gpus_.push_back(std::move(g));
      }
    }
  }
  LoadedLibrary lib_;
  std::vector<Gpu> gpus_;

  amdsmi::Status (*init_)(uint64_t) = nullptr;
  amdsmi::Status (*shut_down_)() = nullptr;
  amdsmi::Status (*status_string_)(amdsmi::Status, const char**) = nullptr;
  amdsmi::Status (*socket_handles_)(uint32_t*, amdsmi::Handle*) = nullptr;
  amdsmi::Status (*processor_handles_)(amdsmi::Handle, uint32_t*, amdsmi::Handle*) = nullptr;
  amdsmi::Status (*uuid_)(amdsmi::Handle, unsigned int*, char*) = nullptr;
  amdsmi::Status (*ecc_count_)(amdsmi::Handle, amdsmi::ErrorCount*) = nullptr;
  amdsmi::Status (*temperature_)(amdsmi::Handle, int, int, int64_t*) = nullptr;
};

}  // namespace

std::unique_ptr<GpuHealthLibrary> open_amdsmi(const std::string& library) {
  return std::make_unique<AmdSmiLibrary>(library);
}

}  // namespace zaya::aegis
