#include "aegis/health_rules.h"

#include <cmath>

#include "core/error.h"

namespace zaya::aegis {

using nlohmann::json;

namespace {

double number_field(const json& r, const char* key, const std::string& where, size_t i) {
  ZAYA_CHECK(r[key].is_number() && std::isfinite(r[key].get<double>()), where, ": health rule ", i,
             " field '", key, "' must be a finite number");
  return r[key].get<double>();
}

}  // namespace

std::vector<HealthRule> parse_health_rules(const json& list, const std::string& where) {
  ZAYA_CHECK(list.is_array(), where,
             ": expected a JSON list of {\"metric\": ..., \"increase\" or \"above\": ..., "
             "\"action\": ...}");
  std::vector<HealthRule> rules;
  for (size_t i = 0; i < list.size(); ++i) {
    const json& r = list[i];
    ZAYA_CHECK(r.is_object() && r.contains("metric") && r["metric"].is_string() &&
                   !r["metric"].get<std::string>().empty(),
               where, ": health rule ", i, " needs a string 'metric' (a metric's name)");
    for (const auto& [key, value] : r.items())
      ZAYA_CHECK(key == "metric" || key == "labels" || key == "increase" || key == "above" ||
                     key == "within_s" || key == "action",
                 where, ": health rule ", i, " has unknown key '", key,
                 "' (expected metric, labels, increase or above, within_s, action)");
    HealthRule rule;
    rule.metric = r["metric"].get<std::string>();
    rule.text = r.dump();
    ZAYA_CHECK(r.contains("increase") != r.contains("above"), where, ": health rule ", i,
               " needs exactly one of 'increase' (a counter's growth) and 'above' (a reading)");
    if (r.contains("increase")) {
      rule.test = HealthRule::Test::kIncrease;
      rule.threshold = number_field(r, "increase", where, i);
      ZAYA_CHECK(rule.threshold >= 0, where, ": health rule ", i, " 'increase' must be >= 0");
      if (r.contains("within_s")) {
        rule.within_s = number_field(r, "within_s", where, i);
        ZAYA_CHECK(rule.within_s > 0, where, ": health rule ", i, " 'within_s' must be > 0");
      }
    } else {
      rule.test = HealthRule::Test::kAbove;
      rule.threshold = number_field(r, "above", where, i);
      ZAYA_CHECK(!r.contains("within_s"), where, ": health rule ", i,
                 " 'within_s' goes with 'increase', not 'above'");
    }
    if (r.contains("labels")) {
      ZAYA_CHECK(r["labels"].is_object(), where, ": health rule ", i,
                 " 'labels' must be an object of label values");
      for (const auto& [k, v] : r["labels"].items()) {
        ZAYA_CHECK(v.is_string(), where, ": health rule ", i, " label '", k, "' must be a string");
        rule.labels[k] = v.get<std::string>();
      }
    }
    ZAYA_CHECK(r.contains("action") && r["action"].is_string(), where, ": health rule ", i,
               " needs a string 'action' (restart, stop or mark_bad_host)");
    rule.action = parse_rule_action(r["action"].get<std::string>(),
                                    where + ": health rule " + std::to_string(i));
    rules.push_back(std::move(rule));
  }
  return rules;
}

std::vector<HealthRule> load_health_rules(const std::string& path) {
  return parse_health_rules(read_rules_json(path), path);
}

}  // namespace zaya::aegis
