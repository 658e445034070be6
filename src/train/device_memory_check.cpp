#include "train/device_memory_check.h"

#include <cstdio>

#include "core/error.h"
#include "model/recompute.h"

namespace zaya {

namespace {

int64_t plan_total(const DeviceMemoryRun& run, int64_t micro_batch, int64_t seq,
                   const MemoryOptions& o) {
  return train_memory(run.model, micro_batch, seq / run.context_parallel, run.world, run.runtime, o)
      .total();
}

// "--activation-storage bf16, train.recompute "selective", train.zero_stage 2" for each option
// that fits: the settings as a run sets them.
std::string options_that_fit(const DeviceMemoryRun& run, int64_t seq) {
  std::string fits;
  for (const int act : {4, 2})
    for (const Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull})
      for (const int zero : {1, 2}) {
        MemoryOptions o = run.options;
        o.activations = act, o.recompute = rc, o.zero_stage = zero;
        if (plan_total(run, run.micro_batch, seq, o) > run.memory) continue;
        fits += std::string(fits.empty() ? "" : "; ") + "--activation-storage " +
                (act == 2 ? "bf16" : "fp32") + ", train.recompute \"" + recompute_name(rc) +
                "\", train.zero_stage " + std::to_string(zero);
      }
  return fits.empty() ? "none at this micro-batch and world size" : fits;
}

}  // namespace

DevicePlan check_device_memory(const DeviceMemoryRun& run) {
  int64_t longest = 0, planned = 0;
  for (const auto& [name, seq] : run.phases) {
    const TrainMemory m = train_memory(run.model, run.micro_batch, seq / run.context_parallel,
                                       run.world, run.runtime, run.options);
    if (seq >= longest) longest = seq, planned = m.total();
    if (run.memory <= 0 || m.total() <= run.memory) continue;
    int64_t largest = 0;  // the largest micro-batch that fits with the run's options
    for (int64_t step = int64_t(1) << 30; step > 0; step /= 2)
      if (largest + step < run.micro_batch &&
          plan_total(run, largest + step, seq, run.options) <= run.memory)
        largest += step;
    const auto b = [](int64_t bytes) { return format_bytes(double(bytes)); };
    ZAYA_FAIL(run.config_path, ": data phase '", name, "' (seq_len ", seq,
              ") at 'train.micro_batch' ", run.micro_batch, " plans ", b(m.total()),
              " of device memory per rank, more than the ", b(run.memory), " of ", run.memory_from,
              ": weights ", b(m.weights), ", gradients ", b(m.gradients), ", optimizer state ",
              b(m.optimizer), ", Muon ", b(m.muon), ", ZeRO buffers ", b(m.zero1), ", activations ",
              b(m.activations), " (", run.options.activations == 2 ? "bf16" : "fp32",
              ", recompute ", recompute_plan_name(run.options.recompute), "), runtime ",
              b(m.runtime), "; ",
              largest > 0 ? "'train.micro_batch' " + std::to_string(largest) + " fits"
                          : std::string("not even 'train.micro_batch' 1 fits"),
              "; options that fit at this micro-batch: ", options_that_fit(run, seq),
              " (zaya info --config shows the plan)");
  }
  DevicePlan plan;
  plan.bytes = planned;
  if (run.memory <= 0) return plan;
  char line[200];
  std::snprintf(line, sizeof(line), "device memory plan: %s of %s per rank (%.1f %% free)",
                format_bytes(double(planned)).c_str(), format_bytes(double(run.memory)).c_str(),
                100.0 * (1.0 - double(planned) / double(run.memory)));
  plan.line = line;
  return plan;
}

}  // namespace zaya
