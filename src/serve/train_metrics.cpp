#include "serve/train_metrics.h"

#include <cstdio>

#include <prometheus/gauge.h>
#include <prometheus/text_serializer.h>

#include "core/error.h"

namespace zaya::serve {

namespace {

// A record field's name as Prometheus names a metric: units spelled out (tokens_per_s →
// tokens_per_second, a trailing _s → _seconds).
std::string metric_name(std::string key) {
  if (key.ends_with("_per_s")) return key + "econd";
  if (key.ends_with("_s")) return key + "econds";
  return key;
}

}  // namespace

TrainMetrics::TrainMetrics(int rank)
    : rank_(std::to_string(rank)), registry_(std::make_shared<prometheus::Registry>()) {}

void TrainMetrics::set(const std::string& name, const std::string& help, double value,
                       const std::map<std::string, std::string>& labels) {
  std::map<std::string, std::string> all = labels;
  all["rank"] = rank_;
  prometheus::BuildGauge().Name(name).Help(help).Register(*registry_).Add(all).Set(value);
}

void TrainMetrics::update(const nlohmann::json& record) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [key, value] : record.items())
    if (value.is_number())
      set("zaya_train_" + metric_name(key), "metrics.jsonl's " + key + " of the last step",
          value.get<double>());
  if (record.contains("time_s"))
    for (const auto& [part, seconds] : record["time_s"].items())
      set("zaya_train_step_seconds", "The last step's wall time by part (time_s)",
          seconds.get<double>(), {{"part", part}});
  if (record.contains("memory"))
    for (const auto& [kind, bytes] : record["memory"].items())
      set("zaya_train_memory_bytes", "Memory now and at its peak (memory)", bytes.get<double>(),
          {{"kind", kind}});
  if (record.contains("routers")) {
    const nlohmann::json& r = record["routers"];
    for (size_t k = 0; k < r.value("token_entropy", nlohmann::json::array()).size(); ++k) {
      const std::map<std::string, std::string> stage = {{"stage", std::to_string(k)}};
      set("zaya_train_router_token_entropy", "Mean per-token router entropy, nats",
          r["token_entropy"][k].get<double>(), stage);
      if (r["max_logit"][k].is_number())
        set("zaya_train_router_max_logit", "Largest router logit", r["max_logit"][k].get<double>(),
            stage);
    }
  }
  prometheus::BuildCounter()
      .Name("zaya_train_records_total")
      .Help("Steps recorded by this process")
      .Register(*registry_)
      .Add({{"rank", rank_}})
      .Increment();
}

std::string TrainMetrics::text() {
  std::lock_guard<std::mutex> lock(mutex_);
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

MetricsEndpoint::MetricsEndpoint(const std::string& host, int port,
                                 std::function<std::string()> text)
    : http_(HttpLimits{}) {
  http_.set_error_body([](int status, const std::string& message) {
    return nlohmann::json{{"error", {{"status", status}, {"message", message}}}}.dump();
  });
  http_.route("GET", "/metrics", [text = std::move(text)](const HttpRequest&, HttpResponse& res) {
    res.set_content(text(), "text/plain; version=0.0.4; charset=utf-8");
  });
  port_ = http_.bind(host, port);
  const auto started = [this] {
    std::lock_guard<std::mutex> lock(start_mutex_);
    started_ = true;
    started_cv_.notify_all();
  };
  thread_ = std::thread([this, started] {
    try {
      http_.run(started);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "zaya train: the metrics endpoint stopped: %s\n", e.what());
      started();  // nothing more to wait for
    }
  });
  std::unique_lock<std::mutex> lock(start_mutex_);
  started_cv_.wait(lock, [this] { return started_; });
}

MetricsEndpoint::~MetricsEndpoint() {
  http_.stop_connections();
  http_.stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace zaya::serve
