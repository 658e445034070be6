// What a team watching a run sees of each step (issue 42): where its wall time went, the model
// FLOPs and MFU, memory now and at its peak, and the routers' health. The trainer marks the parts
// of a step as it runs them (StepTimes); the rest is read here, once per step, and written into
// metrics.jsonl (docs/run-directories.md lists the fields). None of it touches the numbers a run
// computes: the losses and weights are the same bits with or without it.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/device_select.h"
#include "core/trace.h"
#include "model/config.h"
#include "optim/router_balancer.h"

namespace zaya {

// A step's wall time by part, in seconds. Marked on this rank: with several ranks, waiting for the
// others shows in reduce_wait_s and sums_s.
struct StepTimes {
  double data_s = 0;         // the micro-batches' tokens sampled and copied
  double forward_s = 0;      // forward passes, the loss included
  double backward_s = 0;     // backward passes (an overlapped reduce-scatter starts within)
  double reduce_wait_s = 0;  // waiting for the gradients' reduce-scatter after the backward
  double sums_s = 0;         // the loss and the routers' loads summed over the ranks
  double optimizer_s = 0;    // the norm, clip, AdamW, Muon (its exchange), the weights' all-gather
  double router_s = 0;       // the balancing biases' update and upload
  double eval_s = 0;         // validation loss, when due
  double tasks_s = 0;        // benchmark tasks, when due
  double checkpoint_s = 0;   // the previous step's save (its snapshot, and the write if in line)
  // From the previous step's record to this one's: every part above and what none of them
  // holds (the records, heartbeats and progress line themselves), to_json's "other".
  double wall_s = 0;
  double parts_s() const;  // the sum of the parts
  nlohmann::json to_json() const;
};

// Adds the seconds since its construction, or since the last mark, to a part of StepTimes; with
// a name, the interval is also a span of the trace when one is recording (core/trace.h).
class PartClock {
 public:
  PartClock() : last_(std::chrono::steady_clock::now()) {}
  void mark(double& part, const char* name = nullptr) {
    const auto now = std::chrono::steady_clock::now();
    part += std::chrono::duration<double>(now - last_).count();
    if (name) trace::record(name, "step", last_, now);
    last_ = now;
  }
  double elapsed() const {  // since the last mark
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - last_).count();
  }
  // The same, recorded as a span of the trace named `name`.
  double elapsed(const char* name) const {
    const auto now = std::chrono::steady_clock::now();
    trace::record(name, "step", last_, now);
    return std::chrono::duration<double>(now - last_).count();
  }

 private:
  std::chrono::steady_clock::time_point last_;
};

// The process's memory: resident now and at its peak (the kernel's figures), and the device's in
// use where it reports one (0 elsewhere).
struct MemoryNow {
  int64_t rss_bytes = 0;
  int64_t peak_rss_bytes = 0;
  int64_t device_bytes = 0;
  int64_t device_peak_bytes = 0;  // where the device counts it (cpu-as-device), else 0
};
MemoryNow memory_now(const ComputeDevice& device);

// The peak that MFU is taken against, in FLOP/s: --peak-tflops when given, else the rate this
// backend measures on a square product of its precision (2048³ on a GPU, 512³ on a CPU; the best
// of three after a warm-up). `source` says which.
struct PeakFlops {
  double flops_per_s = 0;
  std::string source;
};
PeakFlops measure_peak_flops(const ComputeDevice& device, double peak_tflops_given);

// The routers across steps (each stage's load fractions are metrics.jsonl's expert_load): across
// the stages the spread of the busiest route's share, each stage's load entropy over its routes
// (nats; log(routes) is an even spread) and the routes that received no token in the last
// `window` steps.
class RouterWatch {
 public:
  explicit RouterWatch(int window = 100) : window_(window) {}
  void observe(const std::vector<RouteCounts>& stage_counts);
  nlohmann::json to_json() const;  // after observe()

 private:
  int window_;
  std::vector<RouteCounts> last_;
  std::deque<std::vector<RouteCounts>> recent_;  // the last `window` steps' counts
};

// The routers' per-token health over a step's tokens, per MoE stage: the mean entropy of the
// routing distribution (softmax of the logits; nats: 0 is certain, log(routes) undecided) and
// the largest logit. From the logits ZayaModel hands over (set_router_logits_observer), summed in
// token order in double.
struct RouterTokenStats {
  double entropy_sum = 0;
  int64_t tokens = 0;
  double max_logit = -std::numeric_limits<double>::infinity();
  // Adds `rows` rows of `routes` logits each.
  void observe(std::span<const float> logits, int routes);
  double mean_entropy() const { return tokens ? entropy_sum / double(tokens) : 0.0; }
};

// The accounting fields of each step's metrics record, and the run's MFU.
class StepAccounting {
 public:
  // Measures the peak (measure_peak_flops) unless one is given.
  StepAccounting(const ModelConfig& model, const ComputeDevice& device, double peak_tflops_given);
  // Adds flops_per_token, mfu, time_s (the parts and the step), memory and routers to `record`,
  // for a step of `tokens` tokens of length `seq` that took `step_s` (evaluation aside).
  void add_to(nlohmann::json& record, int64_t tokens, int seq, double step_s,
              const StepTimes& times, const std::vector<RouteCounts>& stage_counts);
  const PeakFlops& peak() const { return peak_; }
  // MoE stage k's router logits of one forward of this step (ZayaModel's observer); the next
  // add_to reports them (routers.token_entropy, routers.max_logit) and starts afresh.
  void observe_router_logits(int k, std::span<const float> logits, int routes);
  // The MFU of the steps added so far, over `train_s` seconds of them.
  double mfu_over(double train_s) const;

 private:
  const ModelConfig& model_;
  const ComputeDevice& device_;
  PeakFlops peak_;
  RouterWatch routers_;
  std::vector<RouterTokenStats> token_stats_;  // this step's, per MoE stage
  double model_flops_ = 0;
};

}  // namespace zaya
