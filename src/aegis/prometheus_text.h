// Reads the Prometheus text exposition format (what node_exporter serves at /metrics): one sample
// per line, `name{label="value",...} value [timestamp]`, with `#` lines (HELP, TYPE, comments)
// skipped. Label values may hold the escapes \\, \" and \n. Every malformed line is an error
// naming its line number and what was expected; nothing is guessed.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace zaya::aegis {

struct MetricSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
  // name{a="1",b="2"} with the labels in name order: the same series gives the same key.
  std::string key() const;
};

// `where` names the source in errors ("http://h:9100/metrics").
std::vector<MetricSample> parse_prometheus_text(std::string_view text, const std::string& where);

}  // namespace zaya::aegis
