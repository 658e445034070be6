#include "sizing/gpu_plan.h"

#include <cstdio>
#include <functional>
#include <vector>

#include "core/error.h"
#include "sizing/hardware_profile.h"

namespace zaya {

namespace {

constexpr int kDevices = 2;  // H100 80 GB, MI300X 192 GB

std::vector<HardwareProfile> plan_devices() {
  std::vector<HardwareProfile> gpus(kDevices);
  ZAYA_CHECK(builtin_profile("h100", gpus[0]) && builtin_profile("mi300x", gpus[1]),
             "the built-in GPU profiles are missing");
  return gpus;
}

double usable(const HardwareProfile& p) {
  return (1.0 - kPlanHeadroom) * double(p.memory_bytes);
}

// The device bytes at micro-batch mb from a plan at micro-batch 1 (`at_one`, without the
// runtime): only the activations grow with the micro-batch (each train_memory call builds the
// registry and Muon's plan, seconds for the largest configs).
int64_t device_bytes(const TrainMemory& at_one, const ModelConfig& c, int64_t mb, int64_t seq,
                     const MemoryOptions& o) {
  return at_one.total() - at_one.activations + planned_activations(c, mb, seq, o);
}

// The largest power of two up to 64 whose micro-batch fits each device; 0 where none does.
std::vector<int64_t> largest_micro_batches(const ModelConfig& c, int64_t seq, int world,
                                           const MemoryOptions& o,
                                           const std::vector<HardwareProfile>& gpus) {
  const TrainMemory at_one = train_memory(c, 1, seq, world, 0, o);
  std::vector<int64_t> largest(gpus.size(), 0);
  for (int64_t mb = 1; mb <= 64; mb *= 2)
    for (size_t g = 0; g < gpus.size(); ++g)
      if (double(device_bytes(at_one, c, mb, seq, o) + gpus[g].runtime_bytes) <= usable(gpus[g]))
        largest[g] = mb;
  return largest;
}

std::string micro_batch_cell(int64_t mb) {
  return mb > 0 ? "micro-batch " + std::to_string(mb) : "does not fit";
}

std::string options_line(const GpuPlanRequest& r) {
  const MemoryOptions& o = r.options;
  char line[320];
  std::snprintf(
      line, sizeof(line),
      "memory plan per GPU: %d rank%s (ZeRO-%d), micro-batch %lld x %lld tokens%s, "
      "activations %s, recompute %s%s\n",
      r.world, r.world == 1 ? "" : "s", o.zero_stage, (long long)r.micro_batch, (long long)r.seq,
      r.context_parallel > 1 ? (", context parallel " + std::to_string(r.context_parallel)).c_str()
                             : "",
      o.activations == 2 ? "bf16" : "fp32", recompute_plan_name(o.recompute).c_str(),
      o.lm_head_chunks.enabled()
          ? (", LM head in blocks of " + std::to_string(o.lm_head_chunks.tokens) + " x " +
             std::to_string(o.lm_head_chunks.vocab))
                .c_str()
          : "");
  return line;
}

// The table of every option: activations × recompute × ZeRO stage.
std::string options_table(const ModelConfig& c, const GpuPlanRequest& r,
                          const std::vector<HardwareProfile>& gpus) {
  const int64_t seq = r.seq / r.context_parallel;
  char line[256];
  std::snprintf(line, sizeof(line),
                "every option at %d rank%s, %lld tokens per rank's sequence: the largest "
                "micro-batch with %.0f %% free\n",
                r.world, r.world == 1 ? "" : "s", (long long)seq, 100 * kPlanHeadroom);
  std::string out = line;
  std::snprintf(line, sizeof(line), "  %-11s %-10s %-5s %15s %15s\n", "activations", "recompute",
                "ZeRO", "H100 80 GB", "MI300X 192 GB");
  out += line;
  for (const int act : {4, 2})
    for (const Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull})
      for (const int zero : {1, 2}) {
        MemoryOptions o = r.options;
        o.activations = act, o.recompute = rc, o.zero_stage = zero;
        const std::vector<int64_t> mb = largest_micro_batches(c, seq, r.world, o, gpus);
        std::snprintf(line, sizeof(line), "  %-11s %-10s %-5d %15s %15s\n",
                      act == 2 ? "bf16" : "fp32", recompute_name(rc), zero,
                      micro_batch_cell(mb[0]).c_str(), micro_batch_cell(mb[1]).c_str());
        out += line;
      }
  return out;
}

}  // namespace

std::string format_gpu_memory_plan(const ModelConfig& c, const GpuPlanRequest& r) {
  ZAYA_CHECK(r.world >= 1, "--world must be at least 1, got ", r.world);
  ZAYA_CHECK(r.context_parallel >= 1 && r.world % r.context_parallel == 0, "--context-parallel ",
             r.context_parallel, " must divide --world ", r.world);
  ZAYA_CHECK(r.seq % r.context_parallel == 0, "--seq ", r.seq,
             " is not a multiple of --context-parallel ", r.context_parallel);
  const std::vector<HardwareProfile> gpus = plan_devices();
  const MemoryOptions& o = r.options;
  const int64_t seq = r.seq / r.context_parallel;  // each rank's rows of a sequence
  std::string out = options_line(r);
  out +=
      "  (bf16 weights and Muon gradients; the fp32 master weights and optimizer state of the "
      "rank's range only)\n";
  char line[256];
  auto text_row = [&](const char* what, const std::string& h100, const std::string& mi300x) {
    std::snprintf(line, sizeof(line), "  %-46s %15s %15s\n", what, h100.c_str(), mi300x.c_str());
    out += line;
  };
  text_row("", "H100 80 GB", "MI300X 192 GB");
  std::vector<TrainMemory> m;
  for (const HardwareProfile& p : gpus)
    m.push_back(train_memory(c, r.micro_batch, seq, r.world, p.runtime_bytes, o));
  auto row = [&](const char* what, const std::function<int64_t(const TrainMemory&)>& part) {
    text_row(what, format_bytes(double(part(m[0]))), format_bytes(double(part(m[1]))));
  };
  out += "  on the GPU:\n";
  row("weights (bf16)", [](const TrainMemory& t) { return t.weights; });
  row(o.zero_stage == 2 ? "gradients (ZeRO-2: embedding + two stages)"
                        : "gradients (bf16, embedding fp32)",
      [](const TrainMemory& t) { return t.gradients; });
  row("optimizer + fp32 master (range)", [](const TrainMemory& t) { return t.optimizer; });
  row("Muon matrices + Newton-Schulz", [](const TrainMemory& t) { return t.muon; });
  row("ZeRO buffers (range's gradients, staging)", [](const TrainMemory& t) { return t.zero1; });
  std::snprintf(line, sizeof(line), "activations (%s, recompute %s)",
                o.activations == 2 ? "bf16" : "fp32", recompute_plan_name(o.recompute).c_str());
  const std::string acts = line;
  row(acts.c_str(), [](const TrainMemory& t) { return t.activations; });
  row("runtime (context, allocator)", [](const TrainMemory& t) { return t.runtime; });
  row("total on the GPU", [](const TrainMemory& t) { return t.total(); });
  std::string free_cell[kDevices];
  for (int g = 0; g < kDevices; ++g) {
    std::snprintf(
        line, sizeof(line), "%.1f %%",
        100.0 * (1.0 - double(m[size_t(g)].total()) / double(gpus[size_t(g)].memory_bytes)));
    free_cell[g] = line;
  }
  text_row("free of the device", free_cell[0], free_cell[1]);
  out += "  in host memory, per rank:\n";
  row("parameters' fp32 copy (weights)", [](const TrainMemory& t) { return t.host_params; });
  row("checkpoint snapshot + pinned staging (a save)",
      [](const TrainMemory& t) { return t.host_snapshot; });
  const std::vector<int64_t> largest = largest_micro_batches(c, seq, r.world, o, gpus);
  const std::string largest_label =
      "largest micro-batch with " + std::to_string(int(100 * kPlanHeadroom + 0.5)) + " % free";
  text_row(largest_label.c_str(), micro_batch_cell(largest[0]), micro_batch_cell(largest[1]));
  // The fewest ranks (a power of two up to 2^20, a multiple of the context group) at which
  // micro-batch 1 fits; "none" where even 2^20 do not (what every rank holds whole does not).
  std::string fewest[kDevices] = {"none", "none"};
  for (int n = r.context_parallel; n <= (1 << 20); n *= 2) {
    const int64_t bytes = train_memory(c, 1, seq, n, 0, o).total();
    for (int g = 0; g < kDevices; ++g)
      if (fewest[g] == "none" &&
          double(bytes + gpus[size_t(g)].runtime_bytes) <= usable(gpus[size_t(g)]))
        fewest[g] = std::to_string(n);
    if (fewest[0] != "none" && fewest[1] != "none") break;
  }
  text_row("fewest ranks for micro-batch 1", fewest[0], fewest[1]);
  out += options_table(c, r, gpus);
  return out;
}

}  // namespace zaya
