// Aegis reads the GPUs through NVML (aegis/gpu_health.h), here a stand-in NVML whose state file
// the tests write (tests/aegis/fake_nvml.cpp): every figure of every GPU, counters that move, Xid
// events, a lost GPU, the errors at start-up, and a health rule firing on a GPU's series.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "aegis/gpu_health.h"
#include "core/error.h"

namespace zaya::aegis {
namespace {

class GpuHealth : public ::testing::Test {
 protected:
  void SetUp() override {
    state_ = (std::filesystem::temp_directory_path() /
              ("zaya_fake_nvml_" + std::to_string(::getpid()) + ".txt"))
                 .string();
    ::setenv("ZAYA_FAKE_NVML_STATE", state_.c_str(), 1);
  }
  void TearDown() override { std::filesystem::remove(state_); }
  void write(const std::string& text) { std::ofstream(state_) << text; }
  static double find(const std::vector<MetricSample>& samples, const std::string& key) {
    for (const MetricSample& m : samples)
      if (m.key() == key) return m.value;
    ADD_FAILURE() << "no series " << key;
    return -1;
  }
  static bool has(const std::vector<MetricSample>& samples, const std::string& name,
                  const std::string& gpu) {
    for (const MetricSample& m : samples)
      if (m.name == name && m.labels.at("gpu") == gpu) return true;
    return false;
  }
  std::string state_;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_F(GpuHealth, ReadsEveryFigureOfEveryGpu) {
  write(
      "gpus 2\necc_uncorrected 0 2\necc_corrected 0 40\nretired_double_bit 0 3\n"
      "remapped_uncorrectable 0 1\nremap_pending 0 1\ntemperature 0 71\nthrottle 0 72\n"
      "no_ecc 1 1\nno_remap 1 1\ntemperature 1 45\n");
  auto nvml = open_nvml(ZAYA_TEST_FAKE_NVML);
  EXPECT_EQ(nvml->describe(), std::string("NVML (") + ZAYA_TEST_FAKE_NVML + "), 2 GPUs");
  const auto s = nvml->read();
  const std::string g0 = "gpu=\"0\",", u0 = "uuid=\"GPU-fake-0\"";
  EXPECT_EQ(find(s, "zaya_gpu_ecc_errors_total{" + g0 + "type=\"uncorrected\"," + u0 + "}"), 2);
  EXPECT_EQ(find(s, "zaya_gpu_ecc_errors_total{" + g0 + "type=\"corrected\"," + u0 + "}"), 40);
  EXPECT_EQ(find(s, "zaya_gpu_retired_pages{cause=\"double_bit\"," + g0 + u0 + "}"), 3);
  EXPECT_EQ(find(s, "zaya_gpu_retired_pages{cause=\"single_bit\"," + g0 + u0 + "}"), 0);
  EXPECT_EQ(find(s, "zaya_gpu_remapped_rows{cause=\"uncorrectable\"," + g0 + u0 + "}"), 1);
  EXPECT_EQ(find(s, "zaya_gpu_row_remap_pending{" + g0 + u0 + "}"), 1);
  EXPECT_EQ(find(s, "zaya_gpu_row_remap_failed{" + g0 + u0 + "}"), 0);
  EXPECT_EQ(find(s, "zaya_gpu_temperature_celsius{" + g0 + u0 + "}"), 71);
  // 72 = 0x40 | 0x8: hardware thermal slowdown and hardware slowdown, nothing else.
  EXPECT_EQ(find(s, "zaya_gpu_throttled{" + g0 + "reason=\"hw_thermal\"," + u0 + "}"), 1);
  EXPECT_EQ(find(s, "zaya_gpu_throttled{" + g0 + "reason=\"hw_slowdown\"," + u0 + "}"), 1);
  EXPECT_EQ(find(s, "zaya_gpu_throttled{" + g0 + "reason=\"sw_thermal\"," + u0 + "}"), 0);
  EXPECT_EQ(find(s, "zaya_gpu_lost{" + g0 + u0 + "}"), 0);
  EXPECT_EQ(find(s, "zaya_gpu_temperature_celsius{gpu=\"1\",uuid=\"GPU-fake-1\"}"), 45);
  // GPU 1 has no ECC and no row remapping: left out, not reported as 0.
  EXPECT_FALSE(has(s, "zaya_gpu_ecc_errors_total", "1"));
  EXPECT_FALSE(has(s, "zaya_gpu_remapped_rows", "1"));
  EXPECT_TRUE(has(s, "zaya_gpu_ecc_errors_total", "0"));
}

TEST_F(GpuHealth, CountersMoveAndXidEventsAreCountedFromTheOpening) {
  write("gpus 2\nxid 1 13\n");  // before the opening: not counted
  auto nvml = open_nvml(ZAYA_TEST_FAKE_NVML);
  const std::string xid1 = "zaya_gpu_xid_errors_total{gpu=\"1\",uuid=\"GPU-fake-1\"}";
  EXPECT_EQ(find(nvml->read(), xid1), 0);
  write("gpus 2\nxid 1 13\necc_uncorrected 1 1\nxid 1 79\nxid 0 48\nxid 1 94\n");
  const auto s = nvml->read();
  EXPECT_EQ(find(s, xid1), 2);
  EXPECT_EQ(find(s, "zaya_gpu_last_xid{gpu=\"1\",uuid=\"GPU-fake-1\"}"), 94);
  EXPECT_EQ(find(s, "zaya_gpu_xid_errors_total{gpu=\"0\",uuid=\"GPU-fake-0\"}"), 1);
  EXPECT_EQ(find(s,
                 "zaya_gpu_ecc_errors_total{gpu=\"1\",type=\"uncorrected\","
                 "uuid=\"GPU-fake-1\"}"),
            1);
  EXPECT_EQ(find(nvml->read(), xid1), 2);  // each event once
}

TEST_F(GpuHealth, ALostGpuSaysSoAndNothingElse) {
  write("gpus 2\ntemperature 0 50\n");
  auto nvml = open_nvml(ZAYA_TEST_FAKE_NVML);
  write("gpus 2\ntemperature 0 50\nlost 0 1\n");
  const auto s = nvml->read();
  EXPECT_EQ(find(s, "zaya_gpu_lost{gpu=\"0\",uuid=\"GPU-fake-0\"}"), 1);
  EXPECT_FALSE(has(s, "zaya_gpu_temperature_celsius", "0"));
  EXPECT_EQ(find(s, "zaya_gpu_lost{gpu=\"1\",uuid=\"GPU-fake-1\"}"), 0);
}

TEST_F(GpuHealth, StartUpErrorsNameTheLibraryAndTheReason) {
  EXPECT_NE(error_of([] {
              open_nvml("/nonexistent/libnvidia-ml.so.1");
            }).find("cannot load NVML (/nonexistent/libnvidia-ml.so.1)"),
            std::string::npos);
  std::filesystem::remove(state_);  // the stand-in's "driver not loaded"
  EXPECT_NE(error_of([] {
              open_nvml(ZAYA_TEST_FAKE_NVML);
            }).find("nvmlInit_v2 failed: Driver Not Loaded (9)"),
            std::string::npos);
  // A library that is not NVML: the first missing function is named.
  EXPECT_NE(error_of([] { open_nvml(ZAYA_TEST_NOT_A_PLUGIN); }).find("has no function nvmlInit_v2"),
            std::string::npos);
  EXPECT_NE(error_of([] { gpu_health_from_flag("nvml"); }).find("expected HOST=nvml"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              gpu_health_from_flag("h=amdsmi:/nonexistent/libamd_smi.so");
            }).find("cannot load AMD SMI (/nonexistent/libamd_smi.so)"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              gpu_health_from_flag("h=dcgm");
            }).find("expected nvml or amdsmi, or either as KIND:PATH"),
            std::string::npos);
}

TEST_F(GpuHealth, RulesJudgeAGpuSeriesAndRefuseOneNoGpuServes) {
  write("gpus 1\nno_remap 0 1\n");
  auto rules = parse_health_rules(nlohmann::json::parse(R"([
      {"metric": "zaya_gpu_ecc_errors_total", "labels": {"type": "uncorrected"},
       "increase": 0, "action": "mark_bad_host"},
      {"metric": "zaya_gpu_xid_errors_total", "increase": 0, "action": "restart"}])"),
                                  "rules");
  std::vector<std::unique_ptr<HealthSource>> sources;
  sources.push_back(gpu_health_from_flag(std::string("node3=nvml:") + ZAYA_TEST_FAKE_NVML));
  HealthWatch watch(std::move(sources), rules, 1.0);
  watch.start(0);
  EXPECT_TRUE(watch.poll(1).findings.empty());
  write("gpus 1\nno_remap 0 1\necc_uncorrected 0 1\nxid 0 48\n");
  const HealthPoll p = watch.poll(2);
  ASSERT_EQ(p.findings.size(), 2u);
  EXPECT_EQ(p.findings[0].rule, 0u);
  EXPECT_EQ(p.findings[0].host, "node3");
  EXPECT_EQ(p.findings[0].value, 1);
  EXPECT_EQ(p.findings[1].rule, 1u);

  std::vector<std::unique_ptr<HealthSource>> again;
  again.push_back(gpu_health_from_flag(std::string("node3=nvml:") + ZAYA_TEST_FAKE_NVML));
  HealthWatch remap(std::move(again),
                    parse_health_rules(nlohmann::json::parse(R"([{"metric":
                        "zaya_gpu_remapped_rows", "increase": 0, "action": "stop"}])"),
                                       "rules"),
                    1.0);
  EXPECT_NE(error_of([&] {
              remap.start(0);
            }).find("no source serves the metric 'zaya_gpu_remapped_rows'"),
            std::string::npos);
}

TEST_F(GpuHealth, AmdSmiReadsEccAndTemperatureOfEveryGpu) {
  const std::string amd_state = state_ + ".amd";
  ::setenv("ZAYA_FAKE_AMDSMI_STATE", amd_state.c_str(), 1);
  EXPECT_NE(error_of([] {
              open_amdsmi(ZAYA_TEST_FAKE_AMDSMI);
            }).find("amdsmi_init failed: AMDSMI_STATUS_INIT_ERROR - Initialization error (18)"),
            std::string::npos);
  std::ofstream(amd_state) << "gpus 2\necc_uncorrected 0 4\necc_corrected 0 9\n"
                              "temperature 0 77\ntemperature 1 66\nno_ecc 1 1\n";
  auto amd = open_gpu_library(std::string("amdsmi:") + ZAYA_TEST_FAKE_AMDSMI, "--gpu");
  EXPECT_EQ(amd->describe(), std::string("AMD SMI (") + ZAYA_TEST_FAKE_AMDSMI + "), 2 GPUs");
  auto s = amd->read();
  EXPECT_EQ(find(s,
                 "zaya_gpu_ecc_errors_total{gpu=\"0\",type=\"uncorrected\","
                 "uuid=\"amd-fake-0\"}"),
            4);
  EXPECT_EQ(find(s, "zaya_gpu_ecc_errors_total{gpu=\"0\",type=\"corrected\",uuid=\"amd-fake-0\"}"),
            9);
  EXPECT_EQ(find(s, "zaya_gpu_temperature_celsius{gpu=\"0\",uuid=\"amd-fake-0\"}"), 77);
  EXPECT_EQ(find(s, "zaya_gpu_temperature_celsius{gpu=\"1\",uuid=\"amd-fake-1\"}"), 66);
  EXPECT_FALSE(has(s, "zaya_gpu_ecc_errors_total", "1"));  // no ECC on GPU 1: left out
  std::ofstream(amd_state) << "gpus 2\necc_uncorrected 0 5\nno_ecc 1 1\n";
  s = amd->read();
  EXPECT_EQ(find(s,
                 "zaya_gpu_ecc_errors_total{gpu=\"0\",type=\"uncorrected\","
                 "uuid=\"amd-fake-0\"}"),
            5);
  std::filesystem::remove(amd_state);
}

}  // namespace
}  // namespace zaya::aegis
