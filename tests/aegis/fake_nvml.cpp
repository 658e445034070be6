// A stand-in for NVML (libnvidia-ml.so.1) whose GPUs the tests control: the functions zaya's
// GPU health source calls (src/aegis/gpu_health.cpp), answering from a state file named by
// ZAYA_FAKE_NVML_STATE, read again on every call so that a test changes the counters mid-run.
// Lines "KEY VALUE" or "KEY GPU VALUE":
//   gpus N                       how many GPUs (without the file: the driver is not loaded)
//   ecc_uncorrected G N, ecc_corrected G N, retired_double_bit G N, retired_single_bit G N,
//   remapped_uncorrectable G N, remapped_correctable G N, remap_pending G 0|1,
//   remap_failed G 0|1, temperature G C, throttle G MASK
//   no_ecc G 1, no_remap G 1     the GPU does not have that figure (NOT_SUPPORTED)
//   lost G 1                     the GPU has fallen off the bus (GPU_IS_LOST)
//   xid G CODE                   one critical Xid event (each line once, in order)
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace {

struct State {
  bool loaded = false;
  unsigned gpus = 0;
  std::map<std::pair<std::string, unsigned>, unsigned long long> values;
  std::vector<std::pair<unsigned, unsigned long long>> xids;
};

State read_state() {
  State s;
  const char* path = std::getenv("ZAYA_FAKE_NVML_STATE");
  std::FILE* f = path ? std::fopen(path, "r") : nullptr;
  if (!f) return s;
  s.loaded = true;
  char key[64];
  unsigned long long a = 0, b = 0;
  char line[256];
  while (std::fgets(line, sizeof line, f)) {
    const int n = std::sscanf(line, "%63s %llu %llu", key, &a, &b);
    if (n == 2 && std::strcmp(key, "gpus") == 0) s.gpus = unsigned(a);
    if (n != 3) continue;
    if (std::strcmp(key, "xid") == 0)
      s.xids.emplace_back(unsigned(a), b);
    else
      s.values[{key, unsigned(a)}] = b;
  }
  std::fclose(f);
  return s;
}

unsigned long long value(const State& s, const char* key, unsigned gpu) {
  const auto it = s.values.find({key, gpu});
  return it == s.values.end() ? 0 : it->second;
}

// Events handed out so far: those in the file when the event set was made are not (as NVML
// delivers only what happens after), and each later one once.
size_t delivered_xids = 0;

constexpr int kSuccess = 0, kInvalidArgument = 2, kNotSupported = 3, kInsufficientSize = 7,
              kDriverNotLoaded = 9, kTimeout = 10, kGpuIsLost = 15;

// NOT_SUPPORTED or GPU_IS_LOST where the state says so, else success.
int status(const State& s, unsigned gpu, const char* missing_key) {
  if (gpu >= s.gpus) return kInvalidArgument;
  if (value(s, "lost", gpu)) return kGpuIsLost;
  if (missing_key && value(s, missing_key, gpu)) return kNotSupported;
  return kSuccess;
}

}  // namespace

// NVML's types under their C names, as zaya declares them (src/aegis/gpu_health.cpp): the
// sanitizers check each call's type against the function it reaches.
struct nvmlDevice_st;
struct nvmlEventSet_st;
struct nvmlEventData_st {
  nvmlDevice_st* device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

namespace {

// A device handle is its index + 1, so that no handle is null.
nvmlDevice_st* handle_of(unsigned i) {
  return reinterpret_cast<nvmlDevice_st*>(uintptr_t(i) + 1);
}
unsigned index_of(nvmlDevice_st* device) {
  return unsigned(reinterpret_cast<uintptr_t>(device) - 1);
}
nvmlEventSet_st* the_event_set() {
  static int the_set;
  return reinterpret_cast<nvmlEventSet_st*>(&the_set);
}

}  // namespace

extern "C" {

#define ZAYA_FAKE_EXPORT __attribute__((visibility("default")))

ZAYA_FAKE_EXPORT int nvmlInit_v2() {
  return read_state().loaded ? kSuccess : kDriverNotLoaded;
}
ZAYA_FAKE_EXPORT int nvmlShutdown() {
  return kSuccess;
}
ZAYA_FAKE_EXPORT const char* nvmlErrorString(int r) {
  switch (r) {
    case kDriverNotLoaded:
      return "Driver Not Loaded";
    case kGpuIsLost:
      return "GPU is lost";
    case kNotSupported:
      return "Not Supported";
    default:
      return "Unknown Error";
  }
}
ZAYA_FAKE_EXPORT int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = read_state().gpus;
  return kSuccess;
}
ZAYA_FAKE_EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_st** device) {
  *device = handle_of(i);
  return i < read_state().gpus ? kSuccess : kInvalidArgument;
}
ZAYA_FAKE_EXPORT int nvmlDeviceGetUUID(nvmlDevice_st* device, char* uuid, unsigned length) {
  std::snprintf(uuid, length, "GPU-fake-%u", index_of(device));
  return kSuccess;
}
ZAYA_FAKE_EXPORT int nvmlDeviceGetTotalEccErrors(nvmlDevice_st* device, int type, int /*counter*/,
                                                 unsigned long long* count) {
  const State s = read_state();
  const unsigned g = index_of(device);
  const int r = status(s, g, "no_ecc");
  if (r == kSuccess) *count = value(s, type == 1 ? "ecc_uncorrected" : "ecc_corrected", g);
  return r;
}
ZAYA_FAKE_EXPORT int nvmlDeviceGetRetiredPages(nvmlDevice_st* device, int cause, unsigned* count,
                                               unsigned long long* addresses) {
  const State s = read_state();
  const unsigned g = index_of(device);
  const int r = status(s, g, nullptr);
  if (r != kSuccess) return r;
  const unsigned pages =
      unsigned(value(s, cause == 1 ? "retired_double_bit" : "retired_single_bit", g));
  const bool room = *count >= pages;
  if (room && addresses)
    for (unsigned i = 0; i < pages; ++i) addresses[i] = 0x1000ull * (i + 1);
  *count = pages;
  return room ? kSuccess : kInsufficientSize;
}
ZAYA_FAKE_EXPORT int nvmlDeviceGetRemappedRows(nvmlDevice_st* device, unsigned* correctable,
                                               unsigned* uncorrectable, unsigned* pending,
                                               unsigned* failed) {
  const State s = read_state();
  const unsigned g = index_of(device);
  const int r = status(s, g, "no_remap");
  if (r != kSuccess) return r;
  *correctable = unsigned(value(s, "remapped_correctable", g));
  *uncorrectable = unsigned(value(s, "remapped_uncorrectable", g));
  *pending = unsigned(value(s, "remap_pending", g));
  *failed = unsigned(value(s, "remap_failed", g));
  return kSuccess;
}
ZAYA_FAKE_EXPORT int nvmlDeviceGetTemperature(nvmlDevice_st* device, int, unsigned* celsius) {
  const State s = read_state();
  const int r = status(s, index_of(device), nullptr);
  if (r == kSuccess) *celsius = unsigned(value(s, "temperature", index_of(device)));
  return r;
}
ZAYA_FAKE_EXPORT int nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_st* device,
                                                               unsigned long long* reasons) {
  const State s = read_state();
  const int r = status(s, index_of(device), nullptr);
  if (r == kSuccess) *reasons = value(s, "throttle", index_of(device));
  return r;
}
ZAYA_FAKE_EXPORT int nvmlEventSetCreate(nvmlEventSet_st** set) {
  *set = the_event_set();
  delivered_xids = read_state().xids.size();
  return kSuccess;
}
ZAYA_FAKE_EXPORT int nvmlDeviceRegisterEvents(nvmlDevice_st*, unsigned long long,
                                              nvmlEventSet_st*) {
  return kSuccess;
}
ZAYA_FAKE_EXPORT int nvmlEventSetWait_v2(nvmlEventSet_st*, nvmlEventData_st* data, unsigned) {
  const State s = read_state();
  if (delivered_xids >= s.xids.size()) return kTimeout;
  const auto& [gpu, code] = s.xids[delivered_xids++];
  *data = nvmlEventData_st{handle_of(gpu), 0x8, code, 0xFFFFFFFFu, 0xFFFFFFFFu};
  return kSuccess;
}
ZAYA_FAKE_EXPORT int nvmlEventSetFree(nvmlEventSet_st*) {
  return kSuccess;
}

}  // extern "C"
