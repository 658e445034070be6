// Aegis reads the GPUs: the vendor's management library, loaded at run time (dlopen) so that
// zaya needs no GPU driver to build or run, read as Prometheus-style samples that the health
// rules (aegis/health_rules.h) judge like a node exporter's series: NVIDIA's NVML
// (libnvidia-ml.so.1, what nvidia-smi reads) and AMD SMI (libamd_smi.so, what amd-smi reads).
//
// The series, each with labels gpu="INDEX" and uuid="GPU-...":
//   zaya_gpu_ecc_errors_total{type="uncorrected"|"corrected"}  the device's lifetime ECC counts
//   zaya_gpu_retired_pages{cause="double_bit"|"single_bit"}    pages retired (before Ampere)
//   zaya_gpu_remapped_rows{cause="uncorrectable"|"correctable"} rows remapped (Ampere on)
//   zaya_gpu_row_remap_pending, zaya_gpu_row_remap_failed       0 or 1 (pending: reset needed)
//   zaya_gpu_xid_errors_total, zaya_gpu_last_xid               critical Xid events since opened
//   zaya_gpu_temperature_celsius
//   zaya_gpu_throttled{reason="hw_slowdown"|"hw_thermal"|"sw_thermal"|"power_brake"|
//                             "sw_power_cap"}                   0 or 1, now
//   zaya_gpu_lost                                               1: fallen off the bus
// AMD SMI gives the ECC counts and the temperature (the hotspot's: the one the clocks are
// held down by); the other series are NVML's only.
// A figure the GPU does not have (ECC on a card without it, row remapping before Ampere) is left
// out, not reported as 0: a rule on it is refused at start-up as a rule on a metric no source
// serves. A GPU that is lost reports zaya_gpu_lost 1 and nothing else.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "aegis/health_watch.h"
#include "aegis/prometheus_text.h"

namespace zaya::aegis {

class GpuHealthLibrary {
 public:
  virtual ~GpuHealthLibrary() = default;
  virtual std::string describe() const = 0;  // "NVML (libnvidia-ml.so.1), 8 GPUs"
  // Every GPU's series now; zaya::Error when the library cannot be read at all.
  virtual std::vector<MetricSample> read() = 0;
};

// Loads NVML from `library` ("" = libnvidia-ml.so.1 on the loader's path) and initialises it;
// zaya::Error naming the file and the reason (no driver, a library without a function zaya
// needs, NVML's own error) when it cannot.
std::unique_ptr<GpuHealthLibrary> open_nvml(const std::string& library);

// Loads AMD SMI from `library` ("" = libamd_smi.so) and initialises it for AMD GPUs; errors as
// open_nvml's.
std::unique_ptr<GpuHealthLibrary> open_amdsmi(const std::string& library);

// "nvml", "amdsmi", or either with ":PATH" (zaya aegis --gpu-health HOST=..., zaya
// health-exporter --gpu ...): the library opened; an error names `flag` and what was expected.
std::unique_ptr<GpuHealthLibrary> open_gpu_library(const std::string& spec,
                                                   const std::string& flag);

// A health source reading this machine's GPUs through `library`, reported as `host`'s.
std::unique_ptr<HealthSource> make_gpu_health_source(std::string host,
                                                     std::unique_ptr<GpuHealthLibrary> library);
// "HOST=nvml[:PATH]" or "HOST=amdsmi[:PATH]" (zaya aegis --gpu-health).
std::unique_ptr<HealthSource> gpu_health_from_flag(const std::string& spec);

}  // namespace zaya::aegis
