#include "backend/device_select.h"

#include "backend/cpu/cpu_as_device_backend.h"
#include "core/error.h"
#include "dist/communicator.h"

namespace zaya {

const Backend& cpu_as_device_backend(bool bf16_weights) {
  static const CpuAsDeviceBackend fp32(false), bf16(true);
  return bf16_weights ? bf16 : fp32;
}

std::unique_ptr<dist::Communicator> ComputeDevice::make_collective(dist::Communicator& host,
                                                                   bool rank_order_sums) const {
  if (!caps().own_collectives) return nullptr;
  return entry->make_collective(host, rank_order_sums);
}

DeviceMemory ComputeDevice::memory() const {
  return caps().memory_figures ? entry->memory() : DeviceMemory{};
}

void ComputeDevice::check_world(int world) const {
  ZAYA_CHECK(!caps().one_rank || world == 1, "--device ", name,
             " runs one rank only; this run has ", world, " ranks");
}

const DeviceEntry& chosen_device(const std::string& value, const std::string& flag) {
  const DeviceEntry& e = find_device(value, flag);
  if (!e.choose) return e;
  std::string why;
  return find_device(e.choose(&why, flag), flag);
}

ComputeDevice open_device(const std::string& value, Precision precision, const std::string& flag) {
  const DeviceEntry* e = &find_device(value, flag);
  std::string why;  // a choice rule's reason, shown in the description
  if (e->choose) e = &find_device(e->choose(&why, flag), flag);
  const bool bf16 =
      precision == Precision::kBf16 || (precision == Precision::kAuto && e->caps.bf16_by_default);
  ComputeDevice d = e->open(false, flag);  // a device that cannot open fails before bf16 is asked
  ZAYA_CHECK(!bf16 || e->caps.bf16, "--precision bf16: the ", e->name,
             " backend computes in fp32 (bf16 GEMM inputs run on GPUs: --device cuda; "
             "cpu-as-device stands in for their bf16 weights)");
  if (bf16) d = e->open(true, flag);
  d.entry = e;
  d.precision = bf16 ? Precision::kBf16 : Precision::kFp32;
  if (!why.empty()) d.description = d.name + " (" + why + ")";
  return d;
}

}  // namespace zaya
