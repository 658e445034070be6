// Health rules: conditions on the hardware's metrics (a node exporter's counters and gauges, see
// aegis/health_watch.h), each mapped to the same actions as the log rules. A rules file is a JSON
// list such as
//   [{"metric": "node_edac_uncorrectable_errors_total", "increase": 0, "action": "mark_bad_host"},
//    {"metric": "node_network_carrier_changes_total", "increase": 3, "within_s": 60,
//     "action": "restart"},
//    {"metric": "node_hwmon_temp_celsius", "labels": {"chip": "platform_coretemp_0"},
//     "above": 95, "action": "stop"}]
// "increase": X fires when a series of the metric has grown by more than X since the first reading
// (or within the last "within_s" seconds); "above": X when a reading exceeds X. "labels" limits a
// rule to the series carrying those label values. A rule applies to every series of its metric on
// every host's source; mark_bad_host marks the host of the source whose series fired.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "aegis/log_rules.h"

namespace zaya::aegis {

struct HealthRule {
  std::string metric;
  std::map<std::string, std::string> labels;  // all must match
  enum class Test { kIncrease, kAbove } test = Test::kIncrease;
  double threshold = 0;
  double within_s = 0;  // kIncrease: 0 compares with the first reading
  RuleAction action = RuleAction::Restart;
  std::string text;  // the rule as written, for events
};

// `where` (a file name) prefixes every error, which also names the rule's index and field.
std::vector<HealthRule> parse_health_rules(const nlohmann::json& list, const std::string& where);
std::vector<HealthRule> load_health_rules(const std::string& path);

}  // namespace zaya::aegis
