// The loader: stateless determinism, mixture frequencies, per-epoch window coverage, phases,
// validation windows and config errors that name the field.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/data_config.h"
#include "data/loader.h"
#include "data/permutation.h"
#include "test_data_helpers.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json config_json(const fs::path& dir) {
  json j = json::parse(R"({"dir": "", "sources": ["a", "b", "c"], "phases": [
    {"name": "short", "tokens": 1000, "seq_len": 16, "rope_theta": 10000,
     "mixture": {"a": 1, "b": 0}},
    {"name": "mix", "tokens": 5000, "seq_len": 32, "rope_theta": 10000,
     "mixture": {"a": 0.5, "b": 0.3, "c": 0.2}},
    {"name": "long", "tokens": 2000, "seq_len": 64, "rope_theta": 500000,
     "mixture": {"c": 1}}]})");
  j["dir"] = dir.string();
  return j;
}

// Three prepared sources, shared by the tests of this file.
const fs::path& prepared_dir() {
  static const fs::path dir = [] {
    const fs::path d = test::temp_dir("loader");
    test::prepare_synthetic(d, "a", 300, 2000);
    test::prepare_synthetic(d, "b", 200, 1500);
    test::prepare_synthetic(d, "c", 150, 100000);
    return d;
  }();
  return dir;
}

DataLoader make_loader(uint64_t seed) {
  return DataLoader(data_config_from_json(config_json(prepared_dir()), "config.json"), seed);
}

std::vector<int32_t> sample_of(const DataLoader& l, int64_t g, int phase) {
  std::vector<int32_t> out(size_t(l.config().phases[size_t(phase)].seq_len + 1));
  l.sample(g, phase, out);
  return out;
}

TEST(DataPermutation, IsABijectionForManySizes) {
  for (uint64_t n : {1ull, 2ull, 3ull, 5ull, 17ull, 64ull, 1000ull, 4097ull}) {
    FeistelPermutation p(n, 12345 + n);
    std::set<uint64_t> seen;
    for (uint64_t x = 0; x < n; ++x) seen.insert(p(x));
    EXPECT_EQ(seen.size(), n);
    EXPECT_LT(*seen.rbegin(), n);
  }
  // Different keys give different orders.
  FeistelPermutation p1(1000, 1), p2(1000, 2);
  int same = 0;
  for (uint64_t x = 0; x < 1000; ++x) same += p1(x) == p2(x);
  EXPECT_LT(same, 20);
}

TEST(DataLoader, SameSampleForSameIndexAcrossInstancesAndCallOrder) {
  const DataLoader l1 = make_loader(7), l2 = make_loader(7);
  std::vector<std::vector<int32_t>> forward;
  for (int64_t g = 0; g < 50; ++g) forward.push_back(sample_of(l1, g, 1));
  for (int64_t g = 49; g >= 0; --g) EXPECT_EQ(sample_of(l2, g, 1), forward[size_t(g)]) << g;
  EXPECT_EQ(sample_of(l1, 1'000'000'007, 1), sample_of(l2, 1'000'000'007, 1));
  // Another seed gives another order.
  const DataLoader l3 = make_loader(8);
  int same = 0;
  for (int64_t g = 0; g < 50; ++g) same += sample_of(l3, g, 1) == forward[size_t(g)];
  EXPECT_LT(same, 10);
}

TEST(DataLoader, MixtureFrequenciesMatchWeights) {
  const DataLoader l = make_loader(3);
  const int n = 20000;
  std::map<int, int> count;
  for (int64_t g = 0; g < n; ++g) ++count[l.locate(g, 1).source];
  // Binomial sd at p = 0.5 and n = 20000 is 0.0035: a band of 0.015 is over 4 sd.
  EXPECT_NEAR(count[0] / double(n), 0.5, 0.015);
  EXPECT_NEAR(count[1] / double(n), 0.3, 0.015);
  EXPECT_NEAR(count[2] / double(n), 0.2, 0.015);
  // Weight 0 is never drawn.
  for (int64_t g = 0; g < 2000; ++g) EXPECT_EQ(l.locate(g, 0).source, 0);
}

TEST(DataLoader, SingleSourceVisitsEveryWindowOncePerEpoch) {
  const DataLoader l = make_loader(11);
  const int64_t seq = 16;
  const int64_t n = (l.train_tokens(0) - 1) / seq;
  ASSERT_GT(n, 100);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::set<int64_t> windows;
    std::vector<int64_t> order;
    for (int64_t g = epoch * n; g < (epoch + 1) * n; ++g) {
      const auto loc = l.locate(g, 0);
      windows.insert(loc.window);
      order.push_back(loc.window);
    }
    EXPECT_EQ(int64_t(windows.size()), n) << "epoch " << epoch;
    EXPECT_EQ(*windows.rbegin(), n - 1);
    EXPECT_NE(order[0] + 1, order[1]);  // shuffled, not sequential
  }
  // Epochs are shuffled differently.
  EXPECT_NE(l.locate(0, 0).window, l.locate(n, 0).window);
}

TEST(DataLoader, SampleIsTheWindowOfTheConcatenatedShards) {
  // Source "a" has several shards of 2000 tokens, so windows cross shard boundaries.
  const DataLoader l = make_loader(5);
  std::vector<int32_t> all;
  for (int s = 0;; ++s) {
    char name[32];
    std::snprintf(name, sizeof name, "train-%05d.bin", s);
    const fs::path p = prepared_dir() / "a" / name;
    if (!fs::exists(p)) break;
    ShardReader r(p.string());
    for (int64_t i = 0; i < r.size(); ++i) all.push_back(r.at(i));
  }
  ASSERT_EQ(int64_t(all.size()), l.train_tokens(0));
  for (int64_t g = 0; g < 300; ++g) {
    const auto loc = l.locate(g, 0);
    const auto got = sample_of(l, g, 0);
    const std::vector<int32_t> want(all.begin() + loc.window * 16,
                                    all.begin() + loc.window * 16 + 17);
    EXPECT_EQ(got, want) << g;
  }
  // A wrong output size is an error naming the expected length.
  std::vector<int32_t> wrong(16);
  EXPECT_NE(test::error_of([&] { l.sample(0, 0, wrong); }).find("seq_len + 1 = 17"),
            std::string::npos);
}

TEST(DataLoader, PhaseByTokensConsumed) {
  const DataConfig c = data_config_from_json(config_json(prepared_dir()), "config.json");
  EXPECT_EQ(c.total_tokens(), 8000);
  EXPECT_EQ(c.phase_at(0), 0);
  EXPECT_EQ(c.phase_at(999), 0);
  EXPECT_EQ(c.phase_at(1000), 1);
  EXPECT_EQ(c.phase_at(5999), 1);
  EXPECT_EQ(c.phase_at(6000), 2);
  EXPECT_EQ(c.phase_at(100000), 2);
  EXPECT_DOUBLE_EQ(c.phases[2].rope_theta, 500000);
  EXPECT_DOUBLE_EQ(c.phases[1].weights[1], 0.3);
}

TEST(DataLoader, ValidationWindowsInOrder) {
  const DataLoader l = make_loader(1);
  for (int s = 0; s < 3; ++s) {
    const int64_t n = l.val_windows(s, 32);
    ASSERT_GT(n, 2) << s;
    EXPECT_EQ(n, (l.val_tokens(s) - 1) / 32);
    std::vector<int32_t> w0(33), w1(33);
    l.val_sample(s, 0, w0);
    l.val_sample(s, 1, w1);
    EXPECT_EQ(w0[32], w1[0]);  // consecutive windows share their boundary token
  }
  std::vector<int32_t> out(33);
  EXPECT_NE(test::error_of([&] { l.val_sample(0, 1 << 30, out); }).find("validation windows"),
            std::string::npos);
}

TEST(DataConfig, ErrorsNameTheField) {
  auto error_for = [](const std::function<void(json&)>& edit) {
    json j = config_json("data");
    edit(j);
    return test::error_of([&] { data_config_from_json(j, "config.json"); });
  };
  EXPECT_NE(error_for([](json& j) {
              j["phases"][0]["seq"] = 3;
            }).find("config.json: unknown field 'data.phases[0].seq'"),
            std::string::npos);
  EXPECT_NE(error_for([](json& j) { j["shuffle"] = true; }).find("unknown field 'data.shuffle'"),
            std::string::npos);
  EXPECT_NE(error_for([](json& j) {
              j["phases"][1].erase("seq_len");
            }).find("missing required field 'data.phases[1].seq_len'"),
            std::string::npos);
  EXPECT_NE(error_for([](json& j) {
              j["phases"][1]["mixture"]["d"] = 1;
            }).find("'data.phases[1].mixture.d': source 'd' is not in data.sources"),
            std::string::npos);
  EXPECT_NE(error_for([](json& j) {
              j["phases"][0]["mixture"] = {{"a", 0}};
            }).find("'data.phases[0].mixture': weights sum to 0"),
            std::string::npos);
  EXPECT_NE(error_for([](json& j) {
              j["phases"][2]["tokens"] = -5;
            }).find("'data.phases[2].tokens' must be an integer in [1, "),
            std::string::npos);
  EXPECT_NE(error_for([](json& j) {
              j["sources"] = {"a", "a"};
            }).find("listed twice"),
            std::string::npos);
}

TEST(DataLoader, MissingSourceNamesItsIndex) {
  json j = config_json(prepared_dir());
  j["sources"].push_back("nope");
  const std::string msg =
      test::error_of([&] { DataLoader(data_config_from_json(j, "config.json"), 0); });
  EXPECT_NE(msg.find("nope/index.json: cannot open the index of source 'nope'"), std::string::npos)
      << msg;
}

}  // namespace
}  // namespace zaya
