// The device-memory check of `zaya train` on a device backend (a GPU, or cpu-as-device standing
// in for one), before step 1: the run's plan (train/train_memory.h) against the device's memory
// (--device-memory, or what the device says it has). A run that does not fit is refused with
// its table and the options that would make it fit, not left to fail allocating at step 1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "train/train_memory.h"

namespace zaya {

struct DeviceMemoryRun {
  std::string config_path;  // for the message
  ModelConfig model;
  int64_t micro_batch = 1;
  std::vector<std::pair<std::string, int64_t>> phases;  // each data phase's name and seq_len
  int world = 1, context_parallel = 1;
  MemoryOptions options;    // as the run keeps its values (device = true)
  int64_t memory = 0;       // the device's bytes; 0: not known, nothing to check
  int64_t runtime = 0;      // bytes in use on the device before the model (its context)
  std::string memory_from;  // "--device-memory" or the device's name
};

struct DevicePlan {
  int64_t bytes = 0;  // the plan's total at the longest phase
  std::string line;   // for the log: that against the memory and the fraction free ("" unknown)
};
// Throws zaya::Error when a phase's plan passes the device's memory.
DevicePlan check_device_memory(const DeviceMemoryRun& run);

}  // namespace zaya
