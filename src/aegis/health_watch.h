// Aegis reads the hardware: health sources (a node's Prometheus exporter, node_exporter, with its
// EDAC memory-error counters, network and InfiniBand counters and hwmon temperatures), read
// every interval, and health rules (aegis/health_rules.h) judged on their series. Beside the
// log rules and heartbeats, a rule that fires is a fault like any other (the supervisor's
// "health" event, its response, the goodput accounting).
//
// Bad input is found at start-up: a source that cannot be read, or a rule whose metric no source
// serves, is an error naming it (never a rule that silently watches nothing). A source that goes
// away mid-run is an event (health_source_lost, then health_source_back), not a crash.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "aegis/health_rules.h"
#include "aegis/prometheus_text.h"

namespace zaya::aegis {

class HealthSource {
 public:
  virtual ~HealthSource() = default;
  virtual const std::string& host() const = 0;  // the host it reports on (a hostfile name)
  virtual std::string describe() const = 0;     // "node exporter http://h:9100/metrics"
  // The current readings; zaya::Error when the source cannot be read.
  virtual std::vector<MetricSample> read() = 0;
};

// node_exporter (or any Prometheus exporter) at `url`, read over HTTP within `timeout_s`.
std::unique_ptr<HealthSource> make_node_exporter_source(std::string host, std::string url,
                                                        double timeout_s);
// "HOST=URL" (zaya aegis --node-exporter); an error names the flag.
std::unique_ptr<HealthSource> node_exporter_from_flag(const std::string& spec, double timeout_s);

struct HealthFinding {
  size_t rule = 0;  // index in the rules
  std::string host, source, series;
  double value = 0, reference = 0;  // the reading, and what it was judged against
  std::string what;                 // one sentence
};

struct HealthPoll {
  std::vector<HealthFinding> findings;
  std::vector<std::string> lost, back;  // sources that could not be read / can be again (why)
};

class HealthWatch {
 public:
  HealthWatch(std::vector<std::unique_ptr<HealthSource>> sources, std::vector<HealthRule> rules,
              double interval_s);
  // Reads every source once and checks that each rule's metric is served; errors name them.
  void start(double now);
  // Reads the sources when the interval has passed since the last reading; empty otherwise.
  HealthPoll poll(double now);
  const std::vector<HealthRule>& rules() const { return rules_; }

 private:
  struct Series {
    std::deque<std::pair<double, double>> history;  // (time, value), within the longest window
    double first = 0;                               // the reference of "increase" without window
    std::vector<bool> fired;                        // per rule: "above" stays fired until below
  };
  void judge(size_t source, const MetricSample& m, double now, HealthPoll& out);

  std::vector<std::unique_ptr<HealthSource>> sources_;
  std::vector<HealthRule> rules_;
  double interval_s_, last_read_ = -1e300, window_s_ = 0;
  std::vector<bool> lost_;
  std::map<std::string, Series> series_;  // "source index|series key"
};

}  // namespace zaya::aegis
