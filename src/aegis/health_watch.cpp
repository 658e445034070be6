#include "aegis/health_watch.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "aegis/http_fetch.h"
#include "core/error.h"

namespace zaya::aegis {

namespace {

// node_exporter's /metrics is some hundreds of KB on a large node; a bound keeps a wrong URL
// (a file server, say) from filling the supervisor's memory.
constexpr size_t kMaxExporterBytes = size_t(32) << 20;

class NodeExporterSource final : public HealthSource {
 public:
  NodeExporterSource(std::string host, std::string url, double timeout_s)
      : host_(std::move(host)), url_(std::move(url)), timeout_s_(timeout_s) {
    parse_http_url(url_, "node exporter");  // a malformed URL: at once
  }
  const std::string& host() const override { return host_; }
  std::string describe() const override { return "node exporter " + url_ + " (" + host_ + ")"; }
  std::vector<MetricSample> read() override {
    return parse_prometheus_text(http_get(url_, timeout_s_, kMaxExporterBytes), url_);
  }

 private:
  std::string host_, url_;
  double timeout_s_;
};

bool labels_match(const HealthRule& r, const MetricSample& m) {
  for (const auto& [k, v] : r.labels) {
    const auto it = m.labels.find(k);
    if (it == m.labels.end() || it->second != v) return false;
  }
  return true;
}

std::string number(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

}  // namespace

std::unique_ptr<HealthSource> make_node_exporter_source(std::string host, std::string url,
                                                        double timeout_s) {
  return std::make_unique<NodeExporterSource>(std::move(host), std::move(url), timeout_s);
}

std::unique_ptr<HealthSource> node_exporter_from_flag(const std::string& spec, double timeout_s) {
  const size_t eq = spec.find('=');
  ZAYA_CHECK(eq != std::string::npos && eq > 0, "--node-exporter '", spec,
             "': expected HOST=URL, e.g. node7=http://node7:9100/metrics (HOST as the "
             "hostfile names it)");
  return make_node_exporter_source(spec.substr(0, eq), spec.substr(eq + 1), timeout_s);
}

HealthWatch::HealthWatch(std::vector<std::unique_ptr<HealthSource>> sources,
                         std::vector<HealthRule> rules, double interval_s)
    : sources_(std::move(sources)),
      rules_(std::move(rules)),
      interval_s_(interval_s),
      lost_(sources_.size(), false) {
  ZAYA_CHECK(!sources_.empty(),
             "health rules need a source to read (--node-exporter, --gpu-health)");
  ZAYA_CHECK(!rules_.empty(), "health sources need rules to act on them (--health-rules)");
  for (const HealthRule& r : rules_) window_s_ = std::max(window_s_, r.within_s);
}

void HealthWatch::start(double now) {
  std::set<std::string> served;
  std::vector<std::vector<MetricSample>> readings;
  for (const auto& s : sources_) {
    try {
      readings.push_back(s->read());
    } catch (const Error& e) {
      ZAYA_FAIL("cannot read ", s->describe(), " at start-up: ", e.what());
    }
    for (const MetricSample& m : readings.back()) served.insert(m.name);
  }
  for (size_t i = 0; i < rules_.size(); ++i)
    ZAYA_CHECK(served.count(rules_[i].metric), "health rule ", i, " (", rules_[i].text,
               "): no source serves the metric '", rules_[i].metric,
               "' (a misspelt name, or a collector that is not enabled in the exporter)");
  HealthPoll ignored;  // the first readings are the references; nothing has changed yet
  for (size_t s = 0; s < readings.size(); ++s)
    for (const MetricSample& m : readings[s]) judge(s, m, now, ignored);
  last_read_ = now;
}

HealthPoll HealthWatch::poll(double now) {
  HealthPoll out;
  if (now - last_read_ < interval_s_) return out;
  last_read_ = now;
  for (size_t s = 0; s < sources_.size(); ++s) {
    std::vector<MetricSample> samples;
    try {
      samples = sources_[s]->read();
    } catch (const Error& e) {
      if (!lost_[s]) out.lost.push_back(sources_[s]->describe() + ": " + e.what());
      lost_[s] = true;
      continue;
    }
    if (lost_[s]) out.back.push_back(sources_[s]->describe());
    lost_[s] = false;
    for (const MetricSample& m : samples) judge(s, m, now, out);
  }
  return out;
}

void HealthWatch::judge(size_t source, const MetricSample& m, double now, HealthPoll& out) {
  const std::string key = std::to_string(source) + "|" + m.key();
  const bool fresh = !series_.count(key);
  Series& s = series_[key];
  if (fresh) {
    s.first = m.value;
    s.fired.assign(rules_.size(), false);
  }
  // A counter that went down was reset (the exporter or the driver restarted): start again.
  if (!s.history.empty() && m.value < s.history.back().second && m.value < s.first) {
    s.history.clear();
    s.first = m.value;
  }
  s.history.emplace_back(now, m.value);
  while (s.history.size() > 1 && now - s.history.front().first > window_s_) s.history.pop_front();
  for (size_t i = 0; i < rules_.size(); ++i) {
    const HealthRule& r = rules_[i];
    if (r.metric != m.name || !labels_match(r, m)) continue;
    double reference = r.threshold;
    bool fires = false;
    if (r.test == HealthRule::Test::kAbove) {
      fires = m.value > r.threshold && !s.fired[i];
      s.fired[i] = m.value > r.threshold;
    } else {
      reference = s.first;
      if (r.within_s > 0)
        for (const auto& [t, v] : s.history)
          if (now - t <= r.within_s) {
            reference = v;
            break;
          }
      fires = m.value - reference > r.threshold;
    }
    if (!fires) continue;
    HealthFinding f;
    f.rule = i;
    f.host = sources_[source]->host();
    f.source = sources_[source]->describe();
    f.series = m.key();
    f.value = m.value;
    f.reference = reference;
    f.what = r.test == HealthRule::Test::kAbove
                 ? m.key() + " on " + f.host + " reads " + number(m.value) + ", above " +
                       number(r.threshold)
                 : m.key() + " on " + f.host + " rose from " + number(reference) + " to " +
                       number(m.value) +
                       (r.within_s > 0 ? " within " + number(r.within_s) + " s" : "") +
                       " (more than " + number(r.threshold) + ")";
    out.findings.push_back(std::move(f));
    if (r.test == HealthRule::Test::kIncrease) {  // judged from here on: one finding per rise
      s.first = m.value;
      s.history.assign(1, {now, m.value});
    }
  }
}

}  // namespace zaya::aegis
