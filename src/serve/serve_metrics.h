// zaya serve's GET /metrics (Prometheus' text format, through prometheus-cpp's registry and
// serializer): the figures vLLM exports, under vLLM's names where zaya has the same figure, so
// that a dashboard built for vLLM reads zaya too, and zaya's own under zaya_*:
//   vllm:num_requests_running, vllm:num_requests_waiting      gauges, read at each scrape
//   vllm:request_success_total{finished_reason}               counter ("stop", "length")
//   vllm:prompt_tokens_total, vllm:generation_tokens_total     counters
//   vllm:time_to_first_token_seconds                           histogram
//   vllm:time_per_output_token_seconds                         histogram (after the first token)
//   vllm:e2e_request_latency_seconds                           histogram
//   zaya_http_requests_total{status}                           counter, every answered request
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace zaya::serve {

class ServeMetrics {
 public:
  ServeMetrics();
  // An answered HTTP request (every route, errors included).
  void response(int status);
  // A finished completion (one prompt of a request).
  void completion(const std::string& finish_reason, size_t prompt_tokens, size_t generated,
                  double ttft_s, double e2e_s);
  // The text format, with the engine's load as it is now.
  std::string text(int running, size_t waiting);

 private:
  std::mutex mutex_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Gauge& running_;
  prometheus::Gauge& waiting_;
  prometheus::Family<prometheus::Counter>& success_;
  prometheus::Family<prometheus::Counter>& http_;
  prometheus::Counter& prompt_tokens_;
  prometheus::Counter& generation_tokens_;
  prometheus::Histogram& ttft_;
  prometheus::Histogram& tpot_;
  prometheus::Histogram& e2e_;
};

}  // namespace zaya::serve
