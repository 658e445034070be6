#include "aegis/gpu_health.h"

#include <cstdint>
#include <utility>

#include "aegis/loaded_library.h"
#include "core/error.h"

// NVML's handle and event types under their C names, as its header declares them: a call
// through zaya's function pointers then has the type of the function it reaches.
struct nvmlDevice_st;
struct nvmlEventSet_st;
struct nvmlEventData_st {  // nvmlEventData_t as nvmlEventSetWait_v2 fills it
  nvmlDevice_st* device;
  unsigned long long eventType;
  unsigned long long eventData;  // the Xid
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

namespace zaya::aegis {

namespace {

// NVML's C interface, as its header documents it (the functions zaya calls, their argument
// types and the constants it passes). Declared here rather than included: the header ships with
// the driver's development files, not with Debian, and the library is opened at run time anyway.
namespace nvml {
using Return = int;  // nvmlReturn_t
using Device = nvmlDevice_st*;
using EventSet = nvmlEventSet_st*;
using EventData = nvmlEventData_st;
constexpr Return kSuccess = 0, kNotSupported = 3, kInsufficientSize = 7, kTimeout = 10,
                 kGpuIsLost = 15;
constexpr int kMemoryErrorCorrected = 0, kMemoryErrorUncorrected = 1;
constexpr int kAggregateEcc = 1;  // lifetime counts (volatile ones reset with the driver)
constexpr int kPageRetirementSingleBit = 0, kPageRetirementDoubleBit = 1;
constexpr int kTemperatureGpu = 0;
constexpr unsigned long long kEventXidCriticalError = 0x8;
constexpr unsigned int kUuidBuffer = 96;
}  // namespace nvml

// The throttle reasons a team acts on (nvmlClocksThrottleReason* bits); idle and the
// application's own clock settings are not faults.
constexpr std::pair<unsigned long long, const char*> kThrottleReasons[] = {{0x4, "sw_power_cap"},
                                                                           {0x8, "hw_slowdown"},
                                                                           {0x20, "sw_thermal"},
                                                                           {0x40, "hw_thermal"},
                                                                           {0x80, "power_brake"}};

class NvmlLibrary final : public GpuHealthLibrary {
 public:
  explicit NvmlLibrary(const std::string& library)
      : lib_("NVML", library.empty() ? "libnvidia-ml.so.1" : library,
             "is the NVIDIA driver installed? an NVML elsewhere: nvml:PATH") {
    resolve();
    check(init_(), "nvmlInit_v2");
    try {
      unsigned int count = 0;
      check(get_count_(&count), "nvmlDeviceGetCount_v2");
      check(event_set_create_(&events_), "nvmlEventSetCreate");
      for (unsigned int i = 0; i < count; ++i) open_gpu(i);
    } catch (...) {
      close();
      throw;
    }
  }
  ~NvmlLibrary() override { close(); }
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  std::string describe() const override {
    return "NVML (" + lib_.file() + "), " + std::to_string(gpus_.size()) + " GPUs";
  }

  std::vector<MetricSample> read() override {
    drain_xid_events();
    std::vector<MetricSample> out;
    for (const Gpu& g : gpus_) read_gpu(g, out);
    return out;
  }

 private:
  struct Gpu {
    nvml::Device device = nullptr;
    std::string index, uuid;
    int64_t xid_errors = 0;
    int64_t last_xid = 0;
    bool lost = false;
  };

  template <class F>
  void symbol(F& f, const char* name) {
    lib_.resolve(f, name, "a driver older than zaya needs (R450 or later)");
  }
  void resolve() {
    symbol(init_, "nvmlInit_v2");
    symbol(shutdown_, "nvmlShutdown");
    symbol(error_string_, "nvmlErrorString");
    symbol(get_count_, "nvmlDeviceGetCount_v2");
    symbol(get_handle_, "nvmlDeviceGetHandleByIndex_v2");
    symbol(get_uuid_, "nvmlDeviceGetUUID");
    symbol(ecc_errors_, "nvmlDeviceGetTotalEccErrors");
    symbol(retired_pages_, "nvmlDeviceGetRetiredPages");
    symbol(remapped_rows_, "nvmlDeviceGetRemappedRows");
    symbol(temperature_, "nvmlDeviceGetTemperature");
    symbol(throttle_reasons_, "nvmlDeviceGetCurrentClocksThrottleReasons");
    symbol(event_set_create_, "nvmlEventSetCreate");
    symbol(register_events_, "nvmlDeviceRegisterEvents");
    symbol(event_set_wait_, "nvmlEventSetWait_v2");
    symbol(event_set_free_, "nvmlEventSetFree");
  }
  std::string error(nvml::Return r) const {
    const char* s = error_string_ ? error_string_(r) : nullptr;
    return std::string(s ? s : "unknown error") + " (" + std::to_string(r) + ")";
  }
  void check(nvml::Return r, const char* call) const {
    ZAYA_CHECK(r == nvml::kSuccess, "NVML (", lib_.file(), "): ", call, " failed: ", error(r));
  }
  void open_gpu(unsigned int i) {
    Gpu g;
    g.index = std::to_string(i);
    check(get_handle_(i, &g.device), "nvmlDeviceGetHandleByIndex_v2");
    char uuid[nvml::kUuidBuffer] = {};
    check(get_uuid_(g.device, uuid, sizeof uuid), "nvmlDeviceGetUUID");
    g.uuid = uuid;
    // Xid events where the GPU has them (not on every card); counted from here on.
    const nvml::Return r = register_events_(g.device, nvml::kEventXidCriticalError, events_);
    if (r != nvml::kSuccess && r != nvml::kNotSupported)
      ZAYA_FAIL("NVML (", lib_.file(), "): nvmlDeviceRegisterEvents on GPU ", i,
                " failed: ", error(r));
    gpus_.push_back(std::move(g));
  }
  void drain_xid_events() {
    for (int n = 0; n < 10000; ++n) {  // bounded: a flood of events cannot hold the supervisor
      nvml::EventData e{};
      const nvml::Return r = event_set_wait_(events_, &e, 0);
      if (r == nvml::kTimeout) return;
      if (r != nvml::kSuccess) return;  // a lost GPU shows in its own reading
      for (Gpu& g : gpus_)
        if (g.device == e.device && (e.eventType & nvml::kEventXidCriticalError)) {
          ++g.xid_errors;
          g.last_xid = static_cast<int64_t>(e.eventData);
        }
    }
  }
  // One series of `g`'s: name, extra labels, value.
  static void add(std::vector<MetricSample>& out, const Gpu& g, const char* name, double value,
                  std::map<std::string, std::string> labels = {}) {
    labels["gpu"] = g.index;
    labels["uuid"] = g.uuid;
    out.push_back(MetricSample{name, std::move(labels), value});
  }
  // A reading the GPU answered: true; not supported: false (the series is left out); lost: the
  // GPU is marked lost; anything else is an error naming the call and the GPU.
  bool answered(nvml::Return r, Gpu& g, const char* call) const {
    if (r == nvml::kSuccess) return true;
    if (r == nvml::kNotSupported) return false;
    if (r == nvml::kGpuIsLost) {
      g.lost = true;
      return false;
    }
    ZAYA_FAIL("NVML (", lib_.file(), "): ", call, " on GPU ", g.index, " failed: ", error(r));
  }
  void read_gpu(Gpu g, std::vector<MetricSample>& out) const;
  void close() {  // the library itself closes with lib_
    if (events_) event_set_free_(events_);
    events_ = nullptr;
    shutdown_();
  }

  LoadedLibrary lib_;
  nvml::EventSet events_ = nullptr;
  std::vector<Gpu> gpus_;

  nvml::Return (*init_)() = nullptr;
  nvml::Return (*shutdown_)() = nullptr;
  const char* (*error_string_)(nvml::Return) = nullptr;
  nvml::Return (*get_count_)(unsigned int*) = nullptr;
  nvml::Return (*get_handle_)(unsigned int, nvml::Device*) = nullptr;
  nvml::Return (*get_uuid_)(nvml::Device, char*, unsigned int) = nullptr;
  nvml::Return (*ecc_errors_)(nvml::Device, int, int, unsigned long long*) = nullptr;
  nvml::Return (*retired_pages_)(nvml::Device, int, unsigned int*, unsigned long long*) = nullptr;
  nvml::Return (*remapped_rows_)(nvml::Device, unsigned int*, unsigned int*, unsigned int*,
                                 unsigned int*) = nullptr;
  nvml::Return (*temperature_)(nvml::Device, int, unsigned int*) = nullptr;
  nvml::Return (*throttle_reasons_)(nvml::Device, unsigned long long*) = nullptr;
  nvml::Return (*event_set_create_)(nvml::EventSet*) = nullptr;
  nvml::Return (*register_events_)(nvml::Device, unsigned long long, nvml::EventSet) = nullptr;
  nvml::Return (*event_set_wait_)(nvml::EventSet, nvml::EventData*, unsigned int) = nullptr;
  nvml::Return (*event_set_free_)(nvml::EventSet) = nullptr;
};

void NvmlLibrary::read_gpu(Gpu g, std::vector<MetricSample>& out) const {
  std::vector<MetricSample> s;
  for (const auto& [type, name] : {std::pair{nvml::kMemoryErrorUncorrected, "uncorrected"},
                                   std::pair{nvml::kMemoryErrorCorrected, "corrected"}}) {
    unsigned long long count = 0;
    if (answered(ecc_errors_(g.device, type, nvml::kAggregateEcc, &count), g,
                 "nvmlDeviceGetTotalEccErrors"))
      add(s, g, "zaya_gpu_ecc_errors_total", double(count), {{"type", name}});
  }
  for (const auto& [cause, name] : {std::pair{nvml::kPageRetirementDoubleBit, "double_bit"},
                                    std::pair{nvml::kPageRetirementSingleBit, "single_bit"}}) {
    unsigned int pages = 0;  // asked with no room: the count comes back with "insufficient size"
    const nvml::Return r = retired_pages_(g.device, cause, &pages, nullptr);
    if (answered(r == nvml::kInsufficientSize ? nvml::kSuccess : r, g, "nvmlDeviceGetRetiredPages"))
      add(s, g, "zaya_gpu_retired_pages", double(pages), {{"cause", name}});
  }
  unsigned int correctable = 0, uncorrectable = 0, pending = 0, failed = 0;
  if (answered(remapped_rows_(g.device, &correctable, &uncorrectable, &pending, &failed), g,
               "nvmlDeviceGetRemappedRows")) {
    add(s, g, "zaya_gpu_remapped_rows", double(uncorrectable), {{"cause", "uncorrectable"}});
    add(s, g, "zaya_gpu_remapped_rows", double(correctable), {{"cause", "correctable"}});
    add(s, g, "zaya_gpu_row_remap_pending", pending ? 1 : 0);
    add(s, g, "zaya_gpu_row_remap_failed", failed ? 1 : 0);
  }
  unsigned int celsius = 0;
  if (answered(temperature_(g.device, nvml::kTemperatureGpu, &celsius), g,
               "nvmlDeviceGetTemperature"))
    add(s, g, "zaya_gpu_temperature_celsius", double(celsius));
  unsigned long long reasons = 0;
  if (answered(throttle_reasons_(g.device, &reasons), g,
               "nvmlDeviceGetCurrentClocksThrottleReasons"))
    for (const auto& [bit, name] : kThrottleReasons)
      add(s, g, "zaya_gpu_throttled", (reasons & bit) ? 1 : 0, {{"reason", name}});
  if (g.lost) {  // what it said before it fell off is not a reading of it
    add(out, g, "zaya_gpu_lost", 1);
    return;
  }
  add(s, g, "zaya_gpu_xid_errors_total", double(g.xid_errors));
  add(s, g, "zaya_gpu_last_xid", double(g.last_xid));
  add(s, g, "zaya_gpu_lost", 0);
  for (MetricSample& m : s) out.push_back(std::move(m));
}

class GpuHealthSource final : public HealthSource {
 public:
  GpuHealthSource(std::string host, std::unique_ptr<GpuHealthLibrary> library)
      : host_(std::move(host)), library_(std::move(library)) {}
  const std::string& host() const override { return host_; }
  std::string describe() const override { return library_->describe() + " (" + host_ + ")"; }
  std::vector<MetricSample> read() override { return library_->read(); }

 private:
  std::string host_;
  std::unique_ptr<GpuHealthLibrary> library_;
};

}  // namespace

std::unique_ptr<GpuHealthLibrary> open_nvml(const std::string& library) {
  return std::make_unique<NvmlLibrary>(library);
}

std::unique_ptr<GpuHealthLibrary> open_gpu_library(const std::string& spec,
                                                   const std::string& flag) {
  const size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  const std::string path = colon == std::string::npos ? "" : spec.substr(colon + 1);
  if (kind == "nvml") return open_nvml(path);
  if (kind == "amdsmi") return open_amdsmi(path);
  ZAYA_FAIL(flag, " '", spec,
            "': expected nvml or amdsmi, or either as KIND:PATH (the library to load)");
}

std::unique_ptr<HealthSource> make_gpu_health_source(std::string host,
                                                     std::unique_ptr<GpuHealthLibrary> library) {
  return std::make_unique<GpuHealthSource>(std::move(host), std::move(library));
}

std::unique_ptr<HealthSource> gpu_health_from_flag(const std::string& spec) {
  const size_t eq = spec.find('=');
  ZAYA_CHECK(eq != std::string::npos && eq > 0, "--gpu-health '", spec,
             "': expected HOST=nvml or HOST=amdsmi, either with :PATH (HOST as the hostfile "
             "names it: this machine's)");
  return make_gpu_health_source(spec.substr(0, eq),
                                open_gpu_library(spec.substr(eq + 1), "--gpu-health"));
}

}  // namespace zaya::aegis
