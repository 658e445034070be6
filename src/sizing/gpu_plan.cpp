#include "sizing/gpu_plan.h"

#include <cstdio>
#include <vector>

#include "core/error.h"
#include "sizing/hardware_profile.h"
#include "train/train_memory.h"

namespace zaya {

namespace {

constexpr double kUsable = 0.9;  // as `zaya size`: at most 90 % of a device's memory
// The GPU backend as built: bf16 weights (fp32 master weights in the range) and gradients, fp32
// activations. The target adds bf16 activations (docs/gpu.md, Next).
constexpr ValueBytes kBuilt{2, 2, 4}, kTarget{2, 2, 2}, kBuiltRecompute{2, 2, 4, Recompute::kFull};

double limit_of(const HardwareProfile& p) {
  return kUsable * double(p.memory_bytes);
}

}  // namespace

std::string format_gpu_memory_plan(const ModelConfig& c, int64_t seq, int world) {
  ZAYA_CHECK(world >= 1, "--world must be at least 1, got ", world);
  std::vector<HardwareProfile> gpus(2);
  ZAYA_CHECK(builtin_profile("h100", gpus[0]) && builtin_profile("mi300x", gpus[1]),
             "the built-in GPU profiles are missing");
  std::string out;
  char line[256];
  std::snprintf(line, sizeof(line),
                "memory plan per GPU, %d rank%s (ZeRO-1), micro-batch 1 x %lld tokens, bf16 "
                "weights with fp32 master weights in the range:\n",
                world, world == 1 ? "" : "s", (long long)seq);
  out += line;
  std::snprintf(line, sizeof(line), "  %-34s %14s %14s\n", "", "H100 80 GB", "MI300X 192 GB");
  out += line;
  std::vector<TrainMemory> m;
  for (const HardwareProfile& p : gpus)
    m.push_back(train_memory(c, 1, seq, world, p.runtime_bytes, kBuilt));
  auto text_row = [&](const char* what, const std::string(&cells)[2]) {
    std::snprintf(line, sizeof(line), "  %-34s %14s %14s\n", what, cells[0].c_str(),
                  cells[1].c_str());
    out += line;
  };
  auto row = [&](const char* what, auto part) {
    const std::string cells[2] = {format_bytes(double(part(m[0]))),
                                  format_bytes(double(part(m[1])))};
    text_row(what, cells);
  };
  row("weights (bf16)", [](const TrainMemory& t) { return t.weights; });
  row("gradients (bf16, embedding fp32)", [](const TrainMemory& t) { return t.gradients; });
  row("optimizer + fp32 master (range)", [](const TrainMemory& t) { return t.optimizer; });
  row("Muon matrices + Newton-Schulz", [](const TrainMemory& t) { return t.muon; });
  row("ZeRO-1 buffers", [](const TrainMemory& t) { return t.zero1; });
  row("activations (one micro-batch, fp32)", [](const TrainMemory& t) { return t.activations; });
  row("checkpoint snapshot", [](const TrainMemory& t) { return t.checkpoint; });
  row("runtime (context, allocator)", [](const TrainMemory& t) { return t.runtime; });
  row("total", [](const TrainMemory& t) { return t.total(); });
  // Every figure but the runtime is the same on both devices, and the three layouts differ only
  // in the activations: one train_memory per shape (each builds the registry and plans Muon's
  // ranks, seconds for the largest configs `zaya info` accepts).
  std::string fits[2], fewest[2], fewest_target[2], fewest_recompute[2];
  const int64_t built_acts = train_memory(c, 1, seq, 1, 0, kBuilt).activations;
  const int64_t other_acts[2] = {
      train_memory(c, 1, seq, 1, 0, kTarget).activations - built_acts,
      train_memory(c, 1, seq, 1, 0, kBuiltRecompute).activations - built_acts};
  for (size_t g = 0; g < gpus.size(); ++g) {
    fits[g] = "does not fit";
    fewest[g] = fewest_target[g] = fewest_recompute[g] = "none";
  }
  for (int64_t mb = 1; mb <= 64; mb *= 2) {
    const int64_t without_runtime = train_memory(c, mb, seq, world, 0, kBuilt).total();
    for (size_t g = 0; g < gpus.size(); ++g)
      if (double(without_runtime + gpus[g].runtime_bytes) <= limit_of(gpus[g]))
        fits[g] = "micro-batch " + std::to_string(mb);
  }
  // The fewest ranks (a power of two up to 2^20) at which micro-batch 1 fits; "none" where even
  // 2^20 do not (what every rank holds whole does not fit).
  for (int n = 1; n <= (1 << 20); n *= 2) {
    const int64_t without_runtime = train_memory(c, 1, seq, n, 0, kBuilt).total();
    bool all_found = true;
    for (size_t g = 0; g < gpus.size(); ++g) {
      const auto fits_with = [&](int64_t extra) {
        return double(without_runtime + extra + gpus[g].runtime_bytes) <= limit_of(gpus[g]);
      };
      std::string* answers[3] = {&fewest[g], &fewest_target[g], &fewest_recompute[g]};
      const int64_t extras[3] = {0, other_acts[0], other_acts[1]};
      for (int v = 0; v < 3; ++v) {
        if (*answers[v] == "none" && fits_with(extras[v])) *answers[v] = std::to_string(n);
        all_found = all_found && *answers[v] != "none";
      }
    }
    if (all_found) break;
  }
  text_row("largest that fits in 90 %", fits);
  text_row("fewest ranks for micro-batch 1", fewest);
  text_row("... with bf16 activations", fewest_target);
  text_row("... with train.recompute", fewest_recompute);
  out +=
      "  (the GPU backend keeps the weights and the Muon matrices' gradients in bf16 and the "
      "activations in fp32; bf16 activations are next, docs/gpu.md)\n";
  return out;
}

}  // namespace zaya
