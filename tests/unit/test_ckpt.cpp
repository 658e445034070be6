// Sharded checkpoints: bitwise round trips for one and several ranks, and each kind of damage
// (missing marker, truncated or flipped shard, broken manifest) detected and named.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include <unistd.h>

#include "ckpt/async_saver.h"
#include "ckpt/checkpoint.h"
#include "core/error.h"
#include "data/checksum.h"
#include "model/config.h"
#include "optim/optimizer.h"
#include "optim/router_balancer.h"
#include "test_util.h"
#include "world_only_communicator.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;

// A model with non-trivial optimizer and balancer state: two steps on made-up gradients.
struct State {
  ParamStore params;
  Optimizer optimizer;
  RouterBalancer balancer;
  explicit State(const ModelConfig& mc)
      : params(mc),
        optimizer(params.registry(), optim_config_from_json(nlohmann::json::object(), "test")),
        balancer(params.registry(), optim_config_from_json(nlohmann::json::object(), "test")) {}
  void train(int steps) {
    params.init(3);
    for (int s = 0; s < steps; ++s) {
      for (size_t i = 0; i < params.size(); ++i)
        params.grads()[i] = float(int((i * 7919 + size_t(s) * 31) % 201) - 100) * 1e-3f;
      optimizer.step(params, 1e-3);
      std::vector<RouteCounts> counts(size_t(balancer.num_moe_stages()),
                                      RouteCounts(size_t(balancer.num_routes()), 0));
      for (auto& c : counts)
        for (size_t r = 0; r < c.size(); ++r) c[r] = int64_t(r * r + size_t(s));
      balancer.update(params, counts);
    }
  }
};

ModelConfig tiny() {
  return load_model_config(ZAYA_SOURCE_DIR "/configs/tiny.json");
}

bool same(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

using test::error_of;

struct TempDir {
  std::string path;
  explicit TempDir(const std::string& name)
      : path((fs::temp_directory_path() / ("zaya_ckpt_" + name + "_" + std::to_string(getpid())))
                 .string()) {
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

TrainerState trainer_state(int64_t step) {
  TrainerState st;
  st.step = step;
  st.tokens_done = 1000 * step;
  st.sample_index = 16 * step;
  st.seed = 7;
  st.config = {{"model", {{"vocab_size", 97}}}};
  return st;
}

void round_trip(int world) {
  const ModelConfig mc = tiny();
  State a(mc);
  a.train(2);
  TempDir tmp("rt" + std::to_string(world));
  const std::string dir = write_checkpoint(
      tmp.path, take_snapshot(a.params, a.optimizer, a.balancer, trainer_state(2)), world);
  EXPECT_TRUE(fs::exists(fs::path(dir) / "COMPLETE"));
  EXPECT_FALSE(fs::exists(dir + ".tmp"));
  const LoadedCheckpoint ck = load_checkpoint(dir);
  EXPECT_EQ(ck.world_size, world);
  EXPECT_EQ(ck.state.step, 2);
  EXPECT_EQ(ck.state.sample_index, 32);
  EXPECT_EQ(ck.state.tokens_done, 2000);
  EXPECT_EQ(ck.state.optimizer_steps, 2);
  EXPECT_EQ(ck.state.balancer_steps, 2);
  EXPECT_EQ(ck.state.seed, 7u);
  EXPECT_EQ(ck.state.config, trainer_state(2).config);

  State b(mc);
  b.params.init(99);
  restore_checkpoint(ck, b.params, b.optimizer, b.balancer);
  EXPECT_EQ(std::memcmp(a.params.weights(), b.params.weights(), a.params.size() * 4), 0);
  for (const auto& [n, t] : a.optimizer.state_tensors())
    EXPECT_TRUE(same(t, b.optimizer.state_tensors().at(n))) << n;
  for (const auto& [n, t] : a.balancer.state_tensors())
    EXPECT_TRUE(same(t, b.balancer.state_tensors().at(n))) << n;
  EXPECT_EQ(b.optimizer.step_count(), 2);
  EXPECT_EQ(b.balancer.step_count(), 2);
}

TEST(Checkpoint, RoundTripIsBitwiseOneRank) {
  round_trip(1);
}
// Rank boundaries cut tensors into 1-D chunks; the loader reassembles them.
TEST(Checkpoint, RoundTripIsBitwiseThreeRanks) {
  round_trip(3);
}

// A resumed rank of W reads every weight and only its own range of the optimizer state, from a
// checkpoint of another world size, straight into its buffers: the same values as a whole load,
// and bytes read of about P·(1 + 2/W) floats instead of every file whole (3·P).
TEST(Checkpoint, EachRankReadsTheWeightsAndOnlyItsRangeOfTheState) {
  const ModelConfig mc = tiny();
  State a(mc);
  a.train(2);
  TempDir tmp("range");
  const std::string dir = write_checkpoint(
      tmp.path, take_snapshot(a.params, a.optimizer, a.balancer, trainer_state(2)), 3);
  const LoadedCheckpoint header = checkpoint_header(dir, verify_checkpoint(dir));
  const int64_t P = int64_t(a.params.size());
  const auto whole = a.optimizer.state_tensors();
  for (const int W : {1, 2, 4, 7}) {
    for (int r = 0; r < W; ++r) {
      test::WorldOnly comm(r, W);
      const OptimConfig oc = optim_config_from_json(nlohmann::json::object(), "test");
      ParamStore params(mc);
      params.init(99);
      Optimizer opt(params.registry(), oc, &comm);
      RouterBalancer bal(params.registry(), oc);
      const uint64_t read = restore_checkpoint_range(header, params, opt, bal);
      EXPECT_EQ(std::memcmp(a.params.weights(), params.weights(), size_t(P) * 4), 0);
      const int64_t b = opt.shard().begin(), n = opt.shard().size();
      for (const auto& [name, t] : opt.state_tensors())
        EXPECT_EQ(std::memcmp(t.raw(), whole.at(name).data<float>() + b, size_t(n) * 4), 0)
            << name << ", rank " << r << " of " << W;
      for (const auto& [name, t] : a.balancer.state_tensors())
        EXPECT_TRUE(same(t, bal.state_tensors().at(name))) << name;
      EXPECT_EQ(opt.step_count(), 2);
      EXPECT_EQ(bal.step_count(), 2);
      int64_t balancer_floats = 0;
      for (const auto& [name, t] : bal.state_tensors()) balancer_floats += t.numel();
      // Every tensor's weights, the range's share of the two moments, the balancer: the
      // alignment padding between tensors (model/params.h) is not in the checkpoint.
      int64_t tensors = 0, in_range = 0;
      for (const ParamSpec& s : params.registry().specs()) {
        const int64_t lo = int64_t(s.offset), hi = lo + s.numel;
        tensors += s.numel;
        in_range += std::max<int64_t>(0, std::min(hi, b + n) - std::max(lo, b));
      }
      EXPECT_LT(tensors, P) << "tiny.json has tensors of odd sizes: padding expected";
      EXPECT_EQ(read, uint64_t(4 * (tensors + 2 * in_range + balancer_floats)))
          << "rank " << r << " of " << W;
    }
  }
}

class Damage : public ::testing::Test {
 protected:
  void SetUp() override {
    State a(tiny());
    a.train(1);
    dir = write_checkpoint(tmp.path,
                           take_snapshot(a.params, a.optimizer, a.balancer, trainer_state(5)));
    shard = (fs::path(dir) / "rank-00000.safetensors").string();
  }
  void rewrite_manifest(const std::function<void(nlohmann::json&)>& edit) {
    std::ifstream in(fs::path(dir) / "manifest.json");
    nlohmann::json m = nlohmann::json::parse(in);
    edit(m);
    const std::string text = m.dump(1);
    std::ofstream(fs::path(dir) / "manifest.json") << text;
    std::ofstream(fs::path(dir) / "COMPLETE")
        << "manifest.json fnv1a64 " << checksum_hex(fnv1a64(text.data(), text.size())) << "\n";
  }
  TempDir tmp{"damage"};
  std::string dir, shard;
};

TEST_F(Damage, IntactVerifies) {
  EXPECT_EQ(error_of([&] { verify_checkpoint(dir); }), "");
}

TEST_F(Damage, MissingMarker) {
  fs::remove(fs::path(dir) / "COMPLETE");
  EXPECT_NE(
      error_of([&] { load_checkpoint(dir); }).find("missing COMPLETE marker (incomplete write)"),
      std::string::npos);
}

TEST_F(Damage, TruncatedShard) {
  fs::resize_file(shard, fs::file_size(shard) - 100);
  const std::string e = error_of([&] { load_checkpoint(dir); });
  EXPECT_NE(e.find("rank-00000.safetensors has"), std::string::npos) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
}

TEST_F(Damage, FlippedByte) {
  std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-10, std::ios::end);
  char c = 0;
  f.read(&c, 1);
  c = char(c ^ 1);
  f.seekp(-10, std::ios::end);
  f.write(&c, 1);
  f.close();
  const std::string e = error_of([&] { load_checkpoint(dir); });
  EXPECT_NE(e.find("rank-00000.safetensors checksum"), std::string::npos) << e;
  EXPECT_NE(e.find("corrupt file"), std::string::npos) << e;
}

TEST_F(Damage, ManifestEditedBehindTheMarker) {
  std::ofstream(fs::path(dir) / "manifest.json", std::ios::app) << " ";
  EXPECT_NE(error_of([&] { verify_checkpoint(dir); }).find("corrupt manifest"), std::string::npos);
}

TEST_F(Damage, ManifestFieldErrorsNameTheField) {
  rewrite_manifest([](nlohmann::json& m) { m.erase("world_size"); });
  EXPECT_NE(error_of([&] { verify_checkpoint(dir); }).find("lacks field 'world_size'"),
            std::string::npos);
  rewrite_manifest([](nlohmann::json& m) { m["world_size"] = "one"; });
  EXPECT_NE(error_of([&] { verify_checkpoint(dir); }).find("field 'world_size' has the wrong type"),
            std::string::npos);
  rewrite_manifest(
      [](nlohmann::json& m) { m["world_size"] = 1, m["tensors"][0]["chunks"][0]["end"] = 1; });
  const std::string e = error_of([&] { verify_checkpoint(dir); });
  EXPECT_NE(e.find("chunks cover 1 of"), std::string::npos) << e;
  EXPECT_NE(e.find("manifest.json"), std::string::npos) << e;
}

TEST_F(Damage, ShapeMismatchNamesTheTensor) {
  rewrite_manifest([](nlohmann::json& m) {
    for (auto& t : m["tensors"])
      if (t["name"] == "model.embed_tokens.weight") t["shape"] = {t["shape"][1], t["shape"][0]};
  });
  State b(tiny());
  const LoadedCheckpoint ck = load_checkpoint(dir);
  EXPECT_NE(error_of([&] {
              restore_checkpoint(ck, b.params, b.optimizer, b.balancer);
            }).find("tensor 'model.embed_tokens.weight' has shape"),
            std::string::npos);
}

TEST(Checkpoint, LatestSkipsDamagedAndRetentionKeepsLastAndEveryM) {
  TempDir tmp("latest");
  State a(tiny());
  a.train(1);
  {
    ShardedCheckpoint saver(tmp.path, 2, 10);
    for (int64_t step : {5, 10, 15, 20, 25})
      saver.save(a.params, a.optimizer, a.balancer, trainer_state(step));
    saver.wait();
    EXPECT_EQ(saver.last_saved(), checkpoint_dir_name(tmp.path, 25));
  }
  for (int64_t step : {5, 15}) EXPECT_FALSE(fs::exists(checkpoint_dir_name(tmp.path, step)));
  for (int64_t step : {10, 20, 25}) EXPECT_TRUE(fs::exists(checkpoint_dir_name(tmp.path, step)));
  fs::remove(fs::path(checkpoint_dir_name(tmp.path, 25)) / "COMPLETE");
  fs::create_directories(checkpoint_dir_name(tmp.path, 30) + ".tmp");
  std::vector<std::string> skipped;
  const std::string got =
      find_latest_checkpoint(tmp.path, [&](const std::string& m) { skipped.push_back(m); });
  EXPECT_EQ(got, checkpoint_dir_name(tmp.path, 20));
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_NE(skipped[1].find("step-00000025: missing COMPLETE marker (incomplete write), skipped"),
            std::string::npos)
      << skipped[1];
}

// Retention must never delete the checkpoint it just saved, whatever else the directory holds: an
// earlier run's complete checkpoints of later steps once counted as "newer", and keep_last 1
// deleted the step-5 save that had just been written.
TEST(Checkpoint, RetentionNeverDeletesTheNewSaveNorLaterSteps) {
  TempDir tmp("retention");
  State a(tiny());
  a.train(1);
  {
    ShardedCheckpoint old_run(tmp.path, 3, 0);
    for (int64_t step : {20, 25})
      old_run.save(a.params, a.optimizer, a.balancer, trainer_state(step));
    old_run.wait();
  }
  {
    ShardedCheckpoint saver(tmp.path, 1, 0);
    for (int64_t step : {5, 10}) {
      saver.save(a.params, a.optimizer, a.balancer, trainer_state(step));
      saver.wait();
      EXPECT_TRUE(fs::exists(fs::path(checkpoint_dir_name(tmp.path, step)) / "COMPLETE"))
          << "the save of step " << step << " was deleted by retention";
    }
  }
  EXPECT_FALSE(fs::exists(checkpoint_dir_name(tmp.path, 5)));  // keep_last 1 of this timeline
  for (int64_t step : {20, 25}) EXPECT_TRUE(fs::exists(checkpoint_dir_name(tmp.path, step)));
}

}  // namespace
}  // namespace zaya
