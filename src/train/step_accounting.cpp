#include "train/step_accounting.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "model/model_info.h"

namespace zaya {

using nlohmann::json;

double StepTimes::parts_s() const {
  return data_s + forward_s + backward_s + reduce_wait_s + sums_s + optimizer_s + router_s +
         eval_s + tasks_s + checkpoint_s;
}

json StepTimes::to_json() const {
  return {{"data", data_s},         {"forward", forward_s},
          {"backward", backward_s}, {"reduce_wait", reduce_wait_s},
          {"sums", sums_s},         {"optimizer", optimizer_s},
          {"router", router_s},     {"eval", eval_s},
          {"tasks", tasks_s},       {"checkpoint", checkpoint_s},
          {"wall", wall_s},         {"other", wall_s - parts_s()}};
}

MemoryNow memory_now(const ComputeDevice& device) {
  MemoryNow m;
  // statm's second field: resident pages. ru_maxrss: the peak, in KiB on Linux.
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  if (statm >> size >> resident) m.rss_bytes = resident * int64_t(::sysconf(_SC_PAGESIZE));
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) == 0) m.peak_rss_bytes = int64_t(usage.ru_maxrss) * 1024;
  m.peak_rss_bytes = std::max(m.peak_rss_bytes, m.rss_bytes);
  if (device.caps().memory_figures) {
    const DeviceMemory d = device.memory();
    m.device_bytes = int64_t(d.used);
    m.device_peak_bytes = int64_t(d.peak);
  }
  return m;
}

PeakFlops measure_peak_flops(const ComputeDevice& device, double peak_tflops_given) {
  if (peak_tflops_given > 0) return {peak_tflops_given * 1e12, "given (--peak-tflops)"};
  const Backend& be = *device.backend;
  const int n = be.host_memory() ? 512 : 2048;
  const size_t bytes = sizeof(float) * size_t(n) * size_t(n);
  BackendBuffer a(be, bytes), w(be, bytes), out(be, bytes);
  be.fill_zero(a.get(), bytes);
  be.fill_zero(w.get(), bytes);
  double best = 0;
  for (int rep = 0; rep < 4; ++rep) {  // the first warms up (threads, kernels, plans)
    be.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    be.matmul_forward(out.floats(), a.floats(), w.floats(), nullptr, n, n, n);
    be.synchronize();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep > 0 && s > 0) best = std::max(best, 2.0 * double(n) * n * n / s);
  }
  char source[96];
  std::snprintf(source, sizeof(source), "measured: a %dx%dx%d %s product on this device", n, n, n,
                precision_name(device.precision));
  return {best, source};
}

StepAccounting::StepAccounting(const ModelConfig& model, const ComputeDevice& device,
                               double peak_tflops_given)
    : model_(model), device_(device), peak_(measure_peak_flops(device, peak_tflops_given)) {}

void StepAccounting::add_to(json& rec, int64_t tokens, int seq, double step_s,
                            const StepTimes& times, const std::vector<RouteCounts>& stage_counts) {
  const double flops_per_token = compute_model_info(model_, seq).train_flops_per_token;
  model_flops_ += double(tokens) * flops_per_token;
  rec["flops_per_token"] = flops_per_token;
  rec["mfu"] = peak_.flops_per_s > 0 && step_s > 0
                   ? double(tokens) / step_s * flops_per_token / peak_.flops_per_s
                   : 0.0;
  json parts = times.to_json();
  parts["step"] = step_s;
  rec["time_s"] = parts;
  const MemoryNow m = memory_now(device_);
  rec["memory"] = {{"rss_bytes", m.rss_bytes},
                   {"peak_rss_bytes", m.peak_rss_bytes},
                   {"device_bytes", m.device_bytes},
                   {"device_peak_bytes", m.device_peak_bytes}};
  routers_.observe(stage_counts);
  rec["routers"] = routers_.to_json();
  json entropy = json::array(), max_logit = json::array();
  for (const RouterTokenStats& s : token_stats_) {
    entropy.push_back(s.mean_entropy());
    max_logit.push_back(s.tokens ? json(s.max_logit) : json(nullptr));
  }
  rec["routers"]["token_entropy"] = entropy;
  rec["routers"]["max_logit"] = max_logit;
  token_stats_.clear();
}

void StepAccounting::observe_router_logits(int k, std::span<const float> logits, int routes) {
  if (token_stats_.size() <= size_t(k)) token_stats_.resize(size_t(k) + 1);
  token_stats_[size_t(k)].observe(logits, routes);
}

void RouterTokenStats::observe(std::span<const float> logits, int routes) {
  const size_t r = size_t(routes);
  for (size_t row = 0; row + r <= logits.size(); row += r) {
    double top = logits[row];
    for (size_t j = 1; j < r; ++j) top = std::max(top, double(logits[row + j]));
    max_logit = std::max(max_logit, top);
    // With d = x − top and p = e^d / s (s = Σ e^d): −Σ p log p = log s − Σ e^d d / s, one
    // exponential per logit and one logarithm per token.
    double s = 0, weighted = 0;
    for (size_t j = 0; j < r; ++j) {
      const double d = double(logits[row + j]) - top;
      const double e = std::exp(d);
      s += e;
      weighted += e * d;
    }
    entropy_sum += std::log(s) - weighted / s;
    ++tokens;
  }
}

double StepAccounting::mfu_over(double train_s) const {
  return train_s > 0 && peak_.flops_per_s > 0 ? model_flops_ / train_s / peak_.flops_per_s : 0;
}

void RouterWatch::observe(const std::vector<RouteCounts>& stage_counts) {
  last_ = stage_counts;
  recent_.push_back(stage_counts);
  while (int(recent_.size()) > window_) recent_.pop_front();
}

namespace {

// The value at fraction q of the sorted values (nearest rank).
double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * double(v.size())))];
}

double entropy(const std::vector<double>& fractions) {
  double h = 0;
  for (const double p : fractions)
    if (p > 0) h -= p * std::log(p);
  return h;
}

}  // namespace

json RouterWatch::to_json() const {
  std::vector<double> busiest, entropies;
  for (const RouteCounts& counts : last_) {
    const ExpertLoad load = expert_load(counts);
    busiest.push_back(*std::max_element(load.fractions.begin(), load.fractions.end()));
    entropies.push_back(entropy(load.fractions));
  }
  // Routes with no token in any of the recent steps: [stage, route] pairs.
  json idle = json::array();
  for (size_t k = 0; k < last_.size(); ++k)
    for (size_t r = 0; r < last_[k].size(); ++r) {
      bool any = false;
      for (const auto& step : recent_) any = any || step[k][r] > 0;
      if (!any) idle.push_back({k, r});
    }
  const size_t routes = last_.empty() ? 0 : last_[0].size();
  return {{"busiest_share",
           {{"min", quantile(busiest, 0)},
            {"p50", quantile(busiest, 0.5)},
            {"p90", quantile(busiest, 0.9)},
            {"max", quantile(busiest, 1)}}},
          {"entropy", entropies},
          {"entropy_even", routes ? std::log(double(routes)) : 0.0},
          {"idle_routes", idle},
          {"idle_window_steps", recent_.size()}};
}

}  // namespace zaya
