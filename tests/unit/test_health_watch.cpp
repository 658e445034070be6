// Aegis's hardware health: the Prometheus text format reader, the health rules' parser and the
// watch's judgement on readings of a source the test controls.
#include <gtest/gtest.h>

#include <cmath>

#include "aegis/health_watch.h"
#include "core/error.h"

namespace zaya::aegis {
namespace {

TEST(PrometheusText, ReadsSamplesLabelsEscapesAndSkipsComments) {
  const auto s = parse_prometheus_text(
      "# HELP node_edac_uncorrectable_errors_total Total uncorrectable errors.\n"
      "# TYPE node_edac_uncorrectable_errors_total counter\n"
      "node_edac_uncorrectable_errors_total{controller=\"0\"} 3\n"
      "up 1 1712345678000\n"
      "weird{b=\"x\\\"y\\\\z\\n\", a=\"1\"} -Inf\r\n"
      "\n",
      "test");
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].name, "node_edac_uncorrectable_errors_total");
  EXPECT_EQ(s[0].labels.at("controller"), "0");
  EXPECT_EQ(s[0].value, 3);
  EXPECT_EQ(s[1].key(), "up");
  EXPECT_EQ(s[1].value, 1);
  EXPECT_EQ(s[2].labels.at("b"), "x\"y\\z\n");
  EXPECT_TRUE(std::isinf(s[2].value) && s[2].value < 0);
  EXPECT_EQ(s[2].key(), "weird{a=\"1\",b=\"x\"y\\z\n\"}");  // labels in name order
}

TEST(PrometheusText, MalformedLinesNameTheirLine) {
  for (const char* bad : {"m{a=\"1\" 2\n", "m{a=1} 2\n", "m 2 3 4\n", "m two\n", "{a=\"1\"} 2\n",
                          "m{a=\"1\",a=\"2\"} 1\n", "m{a=\"\\q\"} 1\n"}) {
    std::string message;
    try {
      parse_prometheus_text(std::string("ok 1\n") + bad, "src");
    } catch (const Error& e) {
      message = e.what();
    }
    EXPECT_NE(message.find("src: line 2"), std::string::npos) << bad << " -> " << message;
  }
}

TEST(HealthRules, ParseAndRejectWithTheRuleAndField) {
  const auto rules = parse_health_rules(
      nlohmann::json::parse(R"([{"metric": "a_total", "increase": 0, "action": "mark_bad_host"},
                               {"metric": "b", "labels": {"device": "eth0"}, "increase": 3,
                                "within_s": 60, "action": "restart"},
                               {"metric": "t", "above": 95, "action": "stop"}])"),
      "rules.json");
  ASSERT_EQ(rules.size(), 3u);
  EXPECT_EQ(rules[1].labels.at("device"), "eth0");
  EXPECT_EQ(rules[1].within_s, 60);
  EXPECT_EQ(rules[2].test, HealthRule::Test::kAbove);
  for (const char* bad : {R"([{"metric": "a", "action": "restart"}])",
                          R"([{"metric": "a", "increase": 1, "above": 2, "action": "restart"}])",
                          R"([{"metric": "a", "increase": -1, "action": "restart"}])",
                          R"([{"metric": "a", "above": 1, "within_s": 5, "action": "restart"}])",
                          R"([{"metric": "a", "increase": 1, "action": "reboot"}])",
                          R"([{"metric": "a", "increase": 1, "action": "restart", "when": 1}])",
                          R"([{"increase": 1, "action": "restart"}])"}) {
    std::string message;
    try {
      parse_health_rules(nlohmann::json::parse(bad), "rules.json");
    } catch (const Error& e) {
      message = e.what();
    }
    EXPECT_NE(message.find("rules.json: health rule 0"), std::string::npos)
        << bad << " -> " << message;
  }
}

// A source whose readings the test sets, and which it can make unreadable.
class FakeSource final : public HealthSource {
 public:
  explicit FakeSource(std::string host) : host_(std::move(host)) {}
  const std::string& host() const override { return host_; }
  std::string describe() const override { return "fake " + host_; }
  std::vector<MetricSample> read() override {
    if (down) throw Error("connection refused");
    return parse_prometheus_text(text, "fake");
  }
  std::string text;
  bool down = false;

 private:
  std::string host_;
};

TEST(HealthWatch, RulesFireOnceOnTheirSeriesAndALostSourceIsAnEvent) {
  auto a = std::make_unique<FakeSource>("hostA");
  auto b = std::make_unique<FakeSource>("hostB");
  FakeSource* fa = a.get();
  FakeSource* fb = b.get();
  fa->text = "ecc_ue_total{mc=\"0\"} 0\ncarrier_changes_total{device=\"eth0\"} 10\ntemp 50\n";
  fb->text = fa->text;
  std::vector<std::unique_ptr<HealthSource>> sources;
  sources.push_back(std::move(a));
  sources.push_back(std::move(b));
  HealthWatch w(std::move(sources),
                parse_health_rules(
                    nlohmann::json::parse(
                        R"([{"metric": "ecc_ue_total", "increase": 0, "action": "mark_bad_host"},
                            {"metric": "carrier_changes_total", "increase": 3, "within_s": 60, "action": "restart"},
                            {"metric": "temp", "above": 90, "action": "stop"}])"),
                    "r"),
                1.0);
  w.start(0);
  EXPECT_TRUE(w.poll(0.5).findings.empty());  // before the interval: no reading
  EXPECT_TRUE(w.poll(1.0).findings.empty());  // nothing changed
  fb->text = "ecc_ue_total{mc=\"0\"} 1\ncarrier_changes_total{device=\"eth0\"} 12\ntemp 50\n";
  auto p = w.poll(2.0);
  ASSERT_EQ(p.findings.size(), 1u);
  EXPECT_EQ(p.findings[0].rule, 0u);
  EXPECT_EQ(p.findings[0].host, "hostB");
  EXPECT_EQ(p.findings[0].series, "ecc_ue_total{mc=\"0\"}");
  EXPECT_TRUE(w.poll(3.0).findings.empty());  // the same rise is not found twice
  // Carrier changes: 12 -> 14 is 4 more than 10 within 60 s; at t = 100 the window has moved.
  fb->text = "ecc_ue_total{mc=\"0\"} 1\ncarrier_changes_total{device=\"eth0\"} 14\ntemp 50\n";
  p = w.poll(4.0);
  ASSERT_EQ(p.findings.size(), 1u);
  EXPECT_EQ(p.findings[0].rule, 1u);
  EXPECT_EQ(p.findings[0].reference, 10);
  fb->text = "ecc_ue_total{mc=\"0\"} 1\ncarrier_changes_total{device=\"eth0\"} 16\ntemp 50\n";
  EXPECT_TRUE(w.poll(100.0).findings.empty());  // 2 more since the finding
  // A gauge above its bound fires once until it comes back below.
  fa->text = "ecc_ue_total{mc=\"0\"} 0\ncarrier_changes_total{device=\"eth0\"} 10\ntemp 95\n";
  p = w.poll(101.0);
  ASSERT_EQ(p.findings.size(), 1u);
  EXPECT_EQ(p.findings[0].rule, 2u);
  EXPECT_EQ(p.findings[0].host, "hostA");
  EXPECT_TRUE(w.poll(102.0).findings.empty());
  // A source that goes away is one event, and one more when it is back.
  fa->down = true;
  p = w.poll(103.0);
  EXPECT_EQ(p.lost.size(), 1u);
  EXPECT_TRUE(w.poll(104.0).lost.empty());
  fa->down = false;
  EXPECT_EQ(w.poll(105.0).back.size(), 1u);
}

TEST(HealthWatch, StartUpRefusesAnUnreadableSourceAndAnUnservedMetric) {
  auto make = [](bool down, const char* metric) {
    auto s = std::make_unique<FakeSource>("h");
    s->text = "node_edac_uncorrectable_errors_total{controller=\"0\"} 0\n";
    s->down = down;
    std::vector<std::unique_ptr<HealthSource>> v;
    v.push_back(std::move(s));
    return HealthWatch(
        std::move(v),
        parse_health_rules(
            nlohmann::json::array({{{"metric", metric}, {"increase", 0}, {"action", "restart"}}}),
            "r"),
        1.0);
  };
  std::string message;
  try {
    make(true, "node_edac_uncorrectable_errors_total").start(0);
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("cannot read fake h at start-up"), std::string::npos) << message;
  message.clear();
  try {
    make(false, "node_edac_uncorectable_errors_total").start(0);
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("no source serves the metric 'node_edac_uncorectable_errors_total'"),
            std::string::npos)
      << message;
}

}  // namespace
}  // namespace zaya::aegis
