// A stand-in for AMD SMI (libamd_smi.so) whose GPUs the tests control: the functions zaya's GPU
// health source calls (src/aegis/amdsmi_health.cpp), answering from a state file named by
// ZAYA_FAKE_AMDSMI_STATE, read again on every call. Lines "gpus N" (one socket holds them; no
// file: the driver is not loaded), "ecc_uncorrected G N", "ecc_corrected G N",
// "temperature G C" (the hotspot's), "no_ecc G 1" (NOT_SUPPORTED).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>

namespace {

struct State {
  bool loaded = false;
  unsigned gpus = 0;
  std::map<std::pair<std::string, unsigned>, unsigned long long> values;
};

State read_state() {
  State s;
  const char* path = std::getenv("ZAYA_FAKE_AMDSMI_STATE");
  std::FILE* f = path ? std::fopen(path, "r") : nullptr;
  if (!f) return s;
  s.loaded = true;
  char key[64], line[256];
  unsigned long long a = 0, b = 0;
  while (std::fgets(line, sizeof line, f)) {
    const int n = std::sscanf(line, "%63s %llu %llu", key, &a, &b);
    if (n == 2 && std::strcmp(key, "gpus") == 0) s.gpus = unsigned(a);
    if (n == 3) s.values[{key, unsigned(a)}] = b;
  }
  std::fclose(f);
  return s;
}

unsigned long long value(const State& s, const char* key, unsigned gpu) {
  const auto it = s.values.find({key, gpu});
  return it == s.values.end() ? 0 : it->second;
}

constexpr int kSuccess = 0, kInval = 1, kNotSupported = 2, kInitError = 18;
int the_socket;
unsigned index_of(void* handle) {
  return unsigned(reinterpret_cast<uintptr_t>(handle) - 1);
}

}  // namespace

// As zaya declares it (src/aegis/amdsmi_health.cpp): the two counts, then room for the fields
// later versions add. Its C name: the sanitizers check a call's type against the callee's.
struct amdsmi_error_count_t {
  uint64_t correctable_count, uncorrectable_count;
  uint64_t later_fields[14];
};

extern "C" {

__attribute__((visibility("default"))) int amdsmi_init(uint64_t flags) {
  if (flags != (1u << 1)) return kInval;  // zaya asks for AMD GPUs
  return read_state().loaded ? kSuccess : kInitError;
}
__attribute__((visibility("default"))) int amdsmi_shut_down() {
  return kSuccess;
}
__attribute__((visibility("default"))) int amdsmi_status_code_to_string(int status,
                                                                        const char** text) {
  *text = status == kInitError ? "AMDSMI_STATUS_INIT_ERROR - Initialization error"
                               : "AMDSMI_STATUS_NOT_SUPPORTED - Feature not supported";
  return kSuccess;
}
__attribute__((visibility("default"))) int amdsmi_get_socket_handles(uint32_t* count,
                                                                     void** handles) {
  if (handles && *count >= 1) handles[0] = &the_socket;
  *count = 1;
  return kSuccess;
}
__attribute__((visibility("default"))) int amdsmi_get_processor_handles(void* socket,
                                                                        uint32_t* count,
                                                                        void** handles) {
  if (socket != &the_socket) return kInval;
  const unsigned gpus = read_state().gpus;
  if (handles)
    for (unsigned i = 0; i < gpus && i < *count; ++i)
      handles[i] = reinterpret_cast<void*>(uintptr_t(i) + 1);
  *count = gpus;
  return kSuccess;
}
__attribute__((visibility("default"))) int amdsmi_get_gpu_device_uuid(void* handle,
                                                                      unsigned* length,
                                                                      char* uuid) {
  std::snprintf(uuid, *length, "amd-fake-%u", index_of(handle));
  return kSuccess;
}
__attribute__((visibility("default"))) int amdsmi_get_gpu_total_ecc_count(
    void* handle, amdsmi_error_count_t* ec) {
  const State s = read_state();
  const unsigned g = index_of(handle);
  if (g >= s.gpus) return kInval;
  if (value(s, "no_ecc", g)) return kNotSupported;
  *ec = amdsmi_error_count_t{value(s, "ecc_corrected", g), value(s, "ecc_uncorrected", g), {}};
  return kSuccess;
}
__attribute__((visibility("default"))) int amdsmi_get_temp_metric(void* handle, int sensor,
                                                                  int metric, int64_t* celsius) {
  const State s = read_state();
  const unsigned g = index_of(handle);
  if (g >= s.gpus) return kInval;
  if (sensor != 1 || metric != 0) return kNotSupported;  // the hotspot's current reading
  *celsius = int64_t(value(s, "temperature", g));
  return kSuccess;
}

}  // extern "C"
