// Checkpoint verification shared by the ranks (2 and 3): each rank checksums its share of the
// files, and every rank reports the same verdict, naming the damaged file, whichever rank read
// it; --resume auto's search skips the damaged checkpoint on every rank alike.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "ckpt/checkpoint.h"
#include "core/error.h"
#include "model/config.h"
#include "mpi_test_env.h"
#include "optim/optimizer.h"
#include "optim/router_balancer.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;
using dist::g_comm;

// Rank 0 writes a checkpoint of `files` rank files at step `step` under root; all wait for it.
std::string write_shared(const std::string& root, int64_t step, int files) {
  std::string dir = checkpoint_dir_name(root, step);
  if (g_comm->rank() == 0) {
    const ModelConfig mc = load_model_config(ZAYA_SOURCE_DIR "/configs/tiny.json");
    ParamStore params(mc);
    params.init(3);
    const OptimConfig oc = optim_config_from_json(nlohmann::json::object(), "test");
    Optimizer opt(params.registry(), oc);
    RouterBalancer bal(params.registry(), oc);
    TrainerState st;
    st.step = step;
    st.seed = 7;
    st.config = nlohmann::json::object();
    dir = write_checkpoint(root, take_snapshot(params, opt, bal, st), files);
  }
  g_comm->barrier();
  return dir;
}

TEST(SharedVerify, EveryRankGivesTheVerdictOfTheRankThatReadTheFile) {
  const int world = g_comm->world_size();
  // One shared directory for the job (rank 0's pid).
  int32_t pid = g_comm->rank() == 0 ? int32_t(getpid()) : 0;
  g_comm->broadcast(&pid, &pid, 1, DType::I32, 0);
  const std::string root =
      (fs::temp_directory_path() / ("zaya_shared_verify_" + std::to_string(pid))).string();
  const std::string old_dir = write_shared(root, 1, world + 1);
  const std::string new_dir = write_shared(root, 2, world + 1);
  EXPECT_NO_THROW(verify_checkpoint(new_dir, g_comm));
  // Damage the last file of the newest checkpoint: file `world` is read by rank 0 alone.
  const std::string victim = (fs::path(new_dir) / checkpoint_rank_file(world)).string();
  if (g_comm->rank() == 0) {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x7f');
  }
  g_comm->barrier();
  std::string msg;
  try {
    verify_checkpoint(new_dir, g_comm);
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find(checkpoint_rank_file(world) + " checksum"), std::string::npos)
      << "rank " << g_comm->rank() << ": " << msg;
  // Without checksums the damage is not looked for.
  EXPECT_NO_THROW(verify_checkpoint(new_dir, g_comm, false));
  int skipped = 0;
  const std::string found = find_latest_checkpoint(
      root, [&](const std::string&) { ++skipped; }, g_comm);
  EXPECT_EQ(found, old_dir);
  EXPECT_EQ(skipped, 1);
  g_comm->barrier();
  if (g_comm->rank() == 0) fs::remove_all(root);
}

}  // namespace
}  // namespace zaya
