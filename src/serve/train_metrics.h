// `zaya train --metrics-port`: the step accounting of each metrics.jsonl record (docs/commands/
// train.md) as Prometheus gauges, served at GET /metrics by an HTTP server of its own
// (http_server.h) on a thread beside the training loop, in Prometheus' text format
// (prometheus-cpp). Each record's number fields become gauges zaya_train_<field> (step, loss,
// lr, mfu, flops_per_token, ...; units spelled out: tokens_per_second); its time_s parts
// zaya_train_step_seconds{part}; its memory zaya_train_memory_bytes{kind}; the routers' per-stage
// figures zaya_train_router_token_entropy{stage} and zaya_train_router_max_logit{stage}; and a
// counter zaya_train_records_total. Labels carry the rank that serves them: each rank serves its
// own step's figures (rank 0's are metrics.jsonl's records; the others' are built the same way
// from their own times, memory and tokens).
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <prometheus/registry.h>
#include <nlohmann/json.hpp>

#include "serve/http_server.h"

namespace zaya::serve {

class TrainMetrics {
 public:
  explicit TrainMetrics(int rank);
  void update(const nlohmann::json& record);
  std::string text();

 private:
  void set(const std::string& name, const std::string& help, double value,
           const std::map<std::string, std::string>& labels = {});
  std::mutex mutex_;
  std::string rank_;
  std::shared_ptr<prometheus::Registry> registry_;
};

// GET /metrics on host:port, answered with what `text` returns, on a thread of its own until the
// object is destroyed.
class MetricsEndpoint {
 public:
  // Binds now (throws naming the address when it cannot); returns with the server running.
  MetricsEndpoint(const std::string& host, int port, std::function<std::string()> text);
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;
  int port() const { return port_; }

 private:
  HttpServer http_;
  int port_ = 0;
  std::mutex start_mutex_;
  std::condition_variable started_cv_;
  bool started_ = false;  // the server runs, or could not start
  std::thread thread_;
};

}  // namespace zaya::serve
