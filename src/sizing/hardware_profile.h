// A hardware profile: the measured rates `zaya size` predicts memory and step time from. Written
// by `zaya size profile` on the machine itself (CPU), or one of the built-in GPU entries made from
// published peaks (marked measured: false, since no GPU backend runs here yet).
//
// Rates are kept per thread count (a CPU rank's threads are the cores divided by the ranks on the
// machine): the GEMM curve over the `zaya bench gemm --shapes grid` points, STREAM triad
// bandwidth, the time per logit of the loss (cross-entropy forward + backward, timed directly), and
// the two rates of the rest of a step's non-GEMM work, which `zaya size profile` calibrates from
// real steps of probe models (docs/sizing.md): seconds per activation byte (the arena without the
// logits: elementwise passes, norms, gathers) and per causal attention score (the softmax of the
// 64 × 64 blocks, forward and backward).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace zaya {

struct GemmPoint {
  int m = 0, n = 0, k = 0;
  double gflops = 0;
};

struct ProfileRates {
  int threads = 0;  // per rank; 0 on a GPU
  int ranks = 1;    // ranks running at once on the machine while measured
  std::vector<GemmPoint> gemm;
  double membw_gbs = 0;        // STREAM triad, GB/s
  double ns_per_act_byte = 0;  // non-GEMM time per byte of activations
  double ns_per_score = 0;     // non-GEMM time per causal attention score (forward+backward)
  double ns_per_logit = 0;     // cross-entropy forward + backward per logit (timed directly)
  double gemm_efficiency = 0;  // built-ins only: fraction of peak_tflops that large GEMMs reach
};

struct CommRates {
  int world = 0;          // ranks the collectives were measured with (0: not measured)
  double busbw_gbs = 0;   // nccl-tests bus bandwidth of reduce-scatter and all-gather
  double latency_us = 0;  // per collective call
};

// What a profile measures, and the width of the values its rates are for ("device" and "dtype"
// in the file: "cpu" or "gpu", "f32" or "bf16"), parsed once when the file is read.
enum class ProfileDevice { kCpu, kGpu };
enum class ProfileDtype { kF32, kBf16 };

struct HardwareProfile {
  std::string name;
  ProfileDevice device = ProfileDevice::kCpu;
  bool measured = true;
  std::string source;         // how it was made (command, date / published figures)
  int cores = 0;              // CPU cores of the machine (ranks on it share them)
  int64_t memory_bytes = 0;   // per device (CPU: the machine's RAM)
  int64_t runtime_bytes = 0;  // a process before any model: code, libraries, BLAS, threads
  double peak_tflops = 0;     // dense, the profile's dtype (0: unknown)
  ProfileDtype dtype = ProfileDtype::kF32;
  std::vector<ProfileRates> rates;
  CommRates comm;

  // The rates for a rank with `threads` threads while `ranks` ranks share the machine: the entry
  // measured with that many ranks, else one measured alone, with the most threads not above it.
  const ProfileRates& rates_for(int threads, int ranks = 1) const;
};

nlohmann::json profile_to_json(const HardwareProfile& p);
// Errors name `where` (the file) and the field.
HardwareProfile profile_from_json(const nlohmann::json& j, const std::string& where);
HardwareProfile read_profile(const std::string& path);
void write_profile(const HardwareProfile& p, const std::string& path);

// "h100", "mi300x": published peaks and memory (docs/sizing.md has the sources); empty name list
// when `name` is not one.
bool builtin_profile(const std::string& name, HardwareProfile& out);
std::vector<std::string> builtin_profile_names();

// Seconds of `count` m × n × k products at these rates. CPU: each call priced on the GEMM curve,
// interpolated in log space (trilinear over log m, log n, log k, clamped to the measured range, so
// a product outside it runs at the rate of the nearest measured one). GPU: the calls as one
// batched/grouped kernel, as a GPU backend issues a layer's attention blocks or experts: the
// roofline of peak × efficiency (dimensions padded to 64 below 128, else to 128-wide tiles) and
// HBM bandwidth, plus 4 µs per launch, one per `launches`.
double gemm_seconds(const HardwareProfile& p, const ProfileRates& r, int64_t m, int64_t n,
                    int64_t k, int64_t count = 1, int64_t launches = 1);

}  // namespace zaya
