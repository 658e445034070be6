#include "sizing/hardware_profile.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_number.h"
#include "io/json_file.h"
#include "io/text_file.h"

namespace zaya {

using nlohmann::json;

const ProfileRates& HardwareProfile::rates_for(int threads, int ranks) const {
  ZAYA_CHECK(!rates.empty(), "hardware profile '", name, "' has no rates");
  for (const int want : {ranks, 1}) {
    const ProfileRates* below = nullptr;  // the most threads <= `threads`
    const ProfileRates* above = nullptr;  // else the fewest threads
    for (const ProfileRates& r : rates) {
      if (r.ranks != want) continue;
      if (r.threads <= threads && (below == nullptr || r.threads > below->threads)) below = &r;
      if (above == nullptr || r.threads < above->threads) above = &r;
    }
    if (below != nullptr) return *below;
    if (above != nullptr) return *above;
  }
  return rates.front();
}

json profile_to_json(const HardwareProfile& p) {
  json rates = json::array();
  for (const ProfileRates& r : p.rates) {
    json g = json::array();
    for (const GemmPoint& q : r.gemm) g.push_back({q.m, q.n, q.k, q.gflops});
    json e = {{"threads", r.threads},           {"ranks", r.ranks},
              {"membw_gbs", r.membw_gbs},       {"ns_per_act_byte", r.ns_per_act_byte},
              {"ns_per_score", r.ns_per_score}, {"ns_per_logit", r.ns_per_logit},
              {"gemm_m_n_k_gflops", g}};
    if (r.gemm_efficiency > 0) e["gemm_efficiency"] = r.gemm_efficiency;
    rates.push_back(e);
  }
  return {{"format", "zaya-hardware-profile"},
          {"version", 1},
          {"name", p.name},
          {"device", p.device == ProfileDevice::kGpu ? "gpu" : "cpu"},
          {"measured", p.measured},
          {"source", p.source},
          {"cores", p.cores},
          {"memory_bytes", p.memory_bytes},
          {"runtime_bytes", p.runtime_bytes},
          {"peak_tflops", p.peak_tflops},
          {"dtype", p.dtype == ProfileDtype::kBf16 ? "bf16" : "f32"},
          {"rates", rates},
          {"comm",
           {{"world", p.comm.world},
            {"busbw_gbs", p.comm.busbw_gbs},
            {"latency_us", p.comm.latency_us}}}};
}

namespace {

const json& member(const json& j, const char* key, const std::string& where) {
  ZAYA_CHECK(j.is_object() && j.contains(key), where, ": missing field '", key, "'");
  return j.at(key);
}

std::string text(const json& j, const char* key, const std::string& where) {
  const json& v = member(j, key, where);
  ZAYA_CHECK(v.is_string(), where, ": field '", key, "' must be a string, got ", v.type_name());
  return v.get<std::string>();
}

// Integers and numbers through core/json_number.h: a float where an integer belongs, or a value
// outside its range, is an error naming the field (never a conversion that overflows).
int64_t integer(const json& j, const char* key, int64_t lo, int64_t hi, const std::string& where) {
  return json_integer(member(j, key, where), lo, hi, where + ": field '" + key + "'");
}

double number(const json& j, const char* key, double lo, double hi, const std::string& where) {
  return json_finite(member(j, key, where), lo, hi, where + ": field '" + key + "'");
}

constexpr double kHuge = 1e30;

}  // namespace

HardwareProfile profile_from_json(const json& j, const std::string& where) {
  ZAYA_CHECK(j.is_object(), where, ": a hardware profile is a JSON object");
  ZAYA_CHECK(text(j, "format", where) == "zaya-hardware-profile", where,
             ": field 'format' must be \"zaya-hardware-profile\" (written by zaya size profile)");
  integer(j, "version", 1, 1, where);
  HardwareProfile p;
  p.name = text(j, "name", where);
  const std::string device = text(j, "device", where);
  ZAYA_CHECK(device == "cpu" || device == "gpu", where,
             ": field 'device' must be \"cpu\" or \"gpu\", got \"", device, "\"");
  p.device = device == "gpu" ? ProfileDevice::kGpu : ProfileDevice::kCpu;
  const json& measured = member(j, "measured", where);
  ZAYA_CHECK(measured.is_boolean(), where, ": field 'measured' must be true or false");
  p.measured = measured.get<bool>();
  p.source = text(j, "source", where);
  p.cores = int(integer(j, "cores", 0, 1 << 20, where));
  p.memory_bytes = integer(j, "memory_bytes", 1, int64_t(1) << 60, where);
  p.runtime_bytes = integer(j, "runtime_bytes", 0, int64_t(1) << 60, where);
  p.peak_tflops = number(j, "peak_tflops", 0, kHuge, where);
  const std::string dtype = text(j, "dtype", where);
  ZAYA_CHECK(dtype == "f32" || dtype == "bf16", where,
             ": field 'dtype' must be \"f32\" or \"bf16\", got \"", dtype, "\"");
  p.dtype = dtype == "bf16" ? ProfileDtype::kBf16 : ProfileDtype::kF32;
  const json& rates = member(j, "rates", where);
  ZAYA_CHECK(rates.is_array() && !rates.empty(), where,
             ": field 'rates' must be a non-empty array");
  for (size_t i = 0; i < rates.size(); ++i) {
    const std::string at = where + ": rates[" + std::to_string(i) + "]";
    const json& e = rates[i];
    ProfileRates r;
    r.threads = int(integer(e, "threads", 0, 1 << 20, at));
    r.ranks = int(integer(e, "ranks", 1, 1 << 20, at));
    r.membw_gbs = number(e, "membw_gbs", 1e-9, kHuge, at);
    r.ns_per_act_byte = number(e, "ns_per_act_byte", 0, kHuge, at);
    r.ns_per_score = number(e, "ns_per_score", 0, kHuge, at);
    r.ns_per_logit = number(e, "ns_per_logit", 0, kHuge, at);
    if (e.is_object() && e.contains("gemm_efficiency"))
      r.gemm_efficiency = number(e, "gemm_efficiency", 1e-6, 1, at);
    const json& points = member(e, "gemm_m_n_k_gflops", at);
    ZAYA_CHECK(points.is_array(), at, ": field 'gemm_m_n_k_gflops' must be an array");
    for (size_t k = 0; k < points.size(); ++k) {
      const json& q = points[k];
      const std::string pt = at + ": gemm_m_n_k_gflops[" + std::to_string(k) + "]";
      ZAYA_CHECK(q.is_array() && q.size() == 4, pt, " must be [m, n, k, GFLOP/s]");
      GemmPoint g;
      g.m = int(json_integer(q[0], 1, 1 << 24, pt + " m"));
      g.n = int(json_integer(q[1], 1, 1 << 24, pt + " n"));
      g.k = int(json_integer(q[2], 1, 1 << 24, pt + " k"));
      g.gflops = json_finite(q[3], 1e-9, kHuge, pt + " GFLOP/s");
      r.gemm.push_back(g);
    }
    ZAYA_CHECK(p.device == ProfileDevice::kGpu ? r.gemm_efficiency > 0 : !r.gemm.empty(), at,
               p.device == ProfileDevice::kGpu
                   ? ": a GPU entry needs 'gemm_efficiency'"
                   : ": a CPU entry needs its GEMM curve 'gemm_m_n_k_gflops'");
    ZAYA_CHECK(p.device == ProfileDevice::kCpu || p.peak_tflops > 0, where,
               ": a GPU profile needs 'peak_tflops' > 0");
    p.rates.push_back(std::move(r));
  }
  const json& c = member(j, "comm", where);
  p.comm.world = int(integer(c, "world", 0, 1 << 24, where + ": comm"));
  p.comm.busbw_gbs = number(c, "busbw_gbs", 0, kHuge, where + ": comm");
  p.comm.latency_us = number(c, "latency_us", 0, kHuge, where + ": comm");
  ZAYA_CHECK(p.comm.world != 1 && (p.comm.world == 0 || p.comm.busbw_gbs > 0), where,
             ": comm: measured collectives need world > 1 and busbw_gbs > 0 (world 0: none)");
  return p;
}

HardwareProfile read_profile(const std::string& path) {
  return profile_from_json(read_json_file(path, "hardware profile"), path);
}

void write_profile(const HardwareProfile& p, const std::string& path) {
  write_file_atomically(path, profile_to_json(p).dump(2) + "\n");
}

namespace {

// Published figures (docs/sizing.md lists them with their sources). Efficiency and runtime are
// assumptions, not measurements: 70 % of dense peak for large bf16 GEMMs, 2 GiB per process for
// the CUDA/ROCm context, allocator pools and communication buffers.
HardwareProfile gpu_profile(const std::string& name, double tflops, double mem_gib, double hbm_tbs,
                            double link_gbs, const std::string& source) {
  HardwareProfile p;
  p.name = name;
  p.device = ProfileDevice::kGpu;
  p.measured = false;
  p.source = source;
  p.cores = 0;
  p.memory_bytes = int64_t(mem_gib * double(int64_t(1) << 30));
  p.runtime_bytes = int64_t(2) << 30;
  p.peak_tflops = tflops;
  p.dtype = ProfileDtype::kBf16;
  ProfileRates r;
  r.threads = 0;
  r.membw_gbs = hbm_tbs * 1000;
  r.gemm_efficiency = 0.7;
  // Non-GEMM work on a GPU is memory-bound: about 3 passes (write, 2 reads) over every activation
  // byte at the measured bandwidth; attention scores run inside a fused kernel (counted as FLOPs).
  r.ns_per_act_byte = 3.0 / r.membw_gbs;
  r.ns_per_score = 0;
  r.ns_per_logit = 3 * 4.0 / r.membw_gbs;  // logits written once, read twice
  p.rates.push_back(r);
  p.comm.world = 8;
  p.comm.busbw_gbs = link_gbs;
  p.comm.latency_us = 20;
  return p;
}

}  // namespace

bool builtin_profile(const std::string& name, HardwareProfile& out) {
  if (name == "h100") {
    // H100 SXM5: 989 TFLOP/s dense BF16, 80 GB HBM3 (74.5 GiB), 3.35 TB/s peak (3.04 measured);
    // NVLink 4: 450 GB/s per direction.
    out = gpu_profile("NVIDIA H100 SXM5 (published peaks)", 989, 74.5, 3.04, 450,
                      "built-in: NVIDIA H100 datasheet; HBM as measured in the ZAYA1 paper");
    return true;
  }
  if (name == "mi300x") {
    // MI300X: 1307 TFLOP/s dense BF16, 192 GB HBM3 (178.8 GiB), 5.3 TB/s peak (4.33 measured);
    // Infinity Fabric: 7 links of 64 GB/s per direction to the other GPUs of the node.
    out = gpu_profile("AMD Instinct MI300X (published peaks)", 1307, 178.8, 4.33, 448,
                      "built-in: AMD MI300X datasheet; HBM as measured in the ZAYA1 paper");
    return true;
  }
  return false;
}

std::vector<std::string> builtin_profile_names() {
  return {"h100", "mi300x"};
}

namespace {

// Position of log(v) among the sorted axis values: index i and weight t of axis[i + 1].
void locate(const std::vector<int>& axis, double v, size_t& i, double& t) {
  if (axis.size() == 1 || v <= axis.front()) {
    i = 0, t = 0;
    return;
  }
  if (v >= axis.back()) {
    i = axis.size() - 2, t = 1;
    return;
  }
  i = 0;
  while (v > axis[i + 1]) ++i;
  t = (std::log(v) - std::log(axis[i])) / (std::log(axis[i + 1]) - std::log(axis[i]));
}

double cpu_gemm_seconds(const ProfileRates& r, int64_t m, int64_t n, int64_t k) {
  std::vector<int> am, an, ak;
  std::map<std::tuple<int, int, int>, double> rate;
  for (const GemmPoint& q : r.gemm) {
    am.push_back(q.m), an.push_back(q.n), ak.push_back(q.k);
    rate[{q.m, q.n, q.k}] = std::log(q.gflops);
  }
  for (auto* a : {&am, &an, &ak}) {
    std::sort(a->begin(), a->end());
    a->erase(std::unique(a->begin(), a->end()), a->end());
  }
  ZAYA_CHECK(rate.size() == am.size() * an.size() * ak.size(),
             "hardware profile: the GEMM points must form a full M × N × K grid (zaya bench gemm "
             "--shapes grid); got ",
             rate.size(), " points over ", am.size(), " × ", an.size(), " × ", ak.size(), " sizes");
  size_t i, j, l;
  double ti, tj, tl;
  locate(am, double(m), i, ti);
  locate(an, double(n), j, tj);
  locate(ak, double(k), l, tl);
  double log_rate = 0;
  for (int di = 0; di < 2; ++di)
    for (int dj = 0; dj < 2; ++dj)
      for (int dl = 0; dl < 2; ++dl) {
        const double w = (di ? ti : 1 - ti) * (dj ? tj : 1 - tj) * (dl ? tl : 1 - tl);
        if (w == 0) continue;
        const size_t ii = std::min(i + di, am.size() - 1), jj = std::min(j + dj, an.size() - 1),
                     ll = std::min(l + dl, ak.size() - 1);
        log_rate += w * rate.at({am[ii], an[jj], ak[ll]});
      }
  return 2.0 * double(m) * double(n) * double(k) / (std::exp(log_rate) * 1e9);
}

}  // namespace

double gemm_seconds(const HardwareProfile& p, const ProfileRates& r, int64_t m, int64_t n,
                    int64_t k, int64_t count, int64_t launches) {
  if (m <= 0 || n <= 0 || k <= 0 || count <= 0) return 0;
  if (p.device == ProfileDevice::kCpu) return double(count) * cpu_gemm_seconds(r, m, n, k);
  auto pad = [](int64_t v) {
    const int64_t tile = v < 128 ? 64 : 128;
    return double((v + tile - 1) / tile * tile);
  };
  const double compute =
      2.0 * pad(m) * pad(n) * pad(k) / (p.peak_tflops * 1e12 * r.gemm_efficiency);
  const double bytes = 2.0 * (double(m) * k + double(k) * n + double(m) * n);  // bf16
  const double memory = bytes / (r.membw_gbs * 1e9);
  return double(count) * std::max(compute, memory) + 4e-6 * double(std::max<int64_t>(1, launches));
}

}  // namespace zaya
