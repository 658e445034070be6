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

// A device handle is its index + 1, so that no handle is null.
unsigned index_of(void* device) {
  return unsigned(reinterpret_cast<uintptr_t>(device) - 1);
}

// NOT_SUPPORTED or GPU_IS_LOST where the state says so, else success.
int status(const State& s, unsigned gpu, const char* missing_key) {
  if (gpu >= s.gpus) return kInvalidArgument;
  if (value(s, "lost", gpu)) return kGpuIsLost;
  if (missing_key && value(s, missing_key, gpu)) return kNotSupported;
  return kSuccess;
}

struct EventData {
  void* device;
  unsigned long long event_type, event_data;
  unsigned int gpu_instance_id, compute_instance_id;
};

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int nvmlInit_v2() {
  return read_state().loaded ? kSuccess : kDriverNotLoaded;
}
__attribute__((visibility("default"))) int nvmlShutdown() {
  return kSuccess;
}
__attribute__((visibility("default"))) const char* nvmlErrorString(int r) {
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
__attribute__((visibility("default"))) int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = read_state().gpus;
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlDeviceGetHandleByIndex_v2(unsigned i,
                                                                         void** device) {
  *device = reinterpret_cast<void*>(uintptr_t(i) + 1);
  return i < read_state().gpus ? kSuccess : kInvalidArgument;
}
__attribute__((visibility("default"))) int nvmlDeviceGetUUID(void* device, char* uuid,
                                                             unsigned length) {
  std::snprintf(uuid, length, "GPU-fake-%u", index_of(device));
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlDeviceGetTotalEccErrors(void* device, int type,
                                                                       int /*counter*/,
                                                                       unsigned long long* count) {
  const State s = read_state();
  const unsigned g = index_of(device);
  const int r = status(s, g, "no_ecc");
  if (r == kSuccess) *count = value(s, type == 1 ? "ecc_uncorrected" : "ecc_corrected", g);
  return r;
}
__attribute__((visibility("default"))) int nvmlDeviceGetRetiredPages(
    void* device, int cause, unsigned* count, unsigned long long* addresses) {
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
__attribute__((visibility("default"))) int nvmlDeviceGetRemappedRows(void* device,
                                                                     unsigned* correctable,
                                                                     unsigned* uncorrectable,
                                                                     unsigned* pending,
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
__attribute__((visibility("default"))) int nvmlDeviceGetTemperature(void* device, int,
                                                                    unsigned* celsius) {
  const State s = read_state();
  const int r = status(s, index_of(device), nullptr);
  if (r == kSuccess) *celsius = unsigned(value(s, "temperature", index_of(device)));
  return r;
}
__attribute__((visibility("default"))) int nvmlDeviceGetCurrentClocksThrottleReasons(
    void* device, unsigned long long* reasons) {
  const State s = read_state();
  const int r = status(s, index_of(device), nullptr);
  if (r == kSuccess) *reasons = value(s, "throttle", index_of(device));
  return r;
}
__attribute__((visibility("default"))) int nvmlEventSetCreate(void** set) {
  static int the_set;
  *set = &the_set;
  delivered_xids = read_state().xids.size();
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlDeviceRegisterEvents(void*, unsigned long long,
                                                                    void*) {
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlEventSetWait_v2(void*, EventData* data, unsigned) {
  const State s = read_state();
  if (delivered_xids >= s.xids.size()) return kTimeout;
  const auto& [gpu, code] = s.xids[delivered_xids++];
  *data =
      EventData{reinterpret_cast<void*>(uintptr_t(gpu) + 1), 0x8, code, 0xFFFFFFFFu, 0xFFFFFFFFu};
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlEventSetFree(void*) {
  return kSuccess;
}

}  // extern "C"
